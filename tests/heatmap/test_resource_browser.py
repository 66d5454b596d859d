"""Resources in a real browser (invariant 20 (resources are counted)): the health page's
section laid out whole (in use of capacity, holders, line, refusals per day drawn), and a
manager clicks from a holder to its agent's page and its issue's page, each saying what
is held, on a desktop and on a 390 px phone. Screenshots are kept at
/tmp/resources-<page>-<width>.png."""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.errors import ResourceBusy
from coordination.models import Event, ResourceWait
from coordination.services import resources
from tests.conftest import BROWSER_WAIT, expire, password_of

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = (1400, 390)
LONG = "ports:integration-release-candidate-services"


@pytest.fixture
def fleet(workspace, make_issue, make_session):
    """A test database held and wanted, a pool of twelve ports held by three agents (one
    of them dead), a call in line, an idle browser, and refusals over the last days."""
    fix = make_issue(title="Make the claim-conflict heatmap readable on a laptop")
    ship = make_issue(title="Ship the release candidate")
    crew = {name: make_session(name) for name in ("coder-1", "release-manager-0001", "coder-3")}
    gone = make_session("coder-9")
    resources.create_resource(
        workspace=workspace, name="db:test", description="The CI database: one run at a time."
    )
    resources.create_resource(
        workspace=workspace,
        name=LONG,
        capacity=12,
        description="Ports 8100-8111 of the integration host, one per service under test.",
    )
    resources.create_resource(workspace=workspace, name="browser", capacity=2)
    take = resources.acquire
    take(workspace=workspace, name="db:test", session_id=crew["coder-1"].pk, issue_id=fix.pk)
    take(
        workspace=workspace,
        name=LONG,
        session_id=crew["release-manager-0001"].pk,
        units=8,
        issue_id=ship.pk,
    )
    take(workspace=workspace, name=LONG, session_id=crew["coder-1"].pk, units=3, issue_id=fix.pk)
    take(workspace=workspace, name=LONG, session_id=gone.pk)
    expire(gone)
    for _ in range(3):
        with pytest.raises(ResourceBusy):
            take(workspace=workspace, name="db:test", session_id=crew["coder-3"].pk)
    for days_ago, name, count in [(1, "db:test", 4), (2, LONG, 2), (4, "db:test", 1)]:
        for _ in range(count):
            Event.objects.create(
                workspace=workspace,
                type="resource.refused",
                occurred_at=timezone.now() - timedelta(days=days_ago),
                data={"resource": name, "units": 1, "holders": []},
            )
    ResourceWait.objects.create(
        workspace=workspace,
        resource=resources.get_resource(workspace, "db:test"),
        session=crew["coder-3"],
        units=1,
        deadline=timezone.now() + timedelta(minutes=5),
    )
    return {"fix": fix, "ship": ship}


def fits(driver) -> bool:
    return driver.execute_script(
        "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )


def full_page(driver, path: str) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    width = driver.get_window_size()["width"]
    driver.set_window_size(width, min(height + 140, 6000))
    driver.save_screenshot(path)
    driver.set_window_size(width, 1000)


def test_a_manager_reads_the_resources_and_follows_a_holder(browser, live_server, alice, fleet):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver, wait = browser, WebDriverWait(browser, BROWSER_WAIT)
    driver.get(f"{live_server.url}/")
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys("alice")
    driver.find_element(By.NAME, "password").send_keys(password_of("alice"))
    driver.find_element(By.CSS_SELECTOR, "form.stack button[type=submit]").click()
    wait.until(ec.element_to_be_clickable((By.LINK_TEXT, "Health")))

    for width in WIDTHS:
        driver.set_window_size(width, 1000)
        driver.get(f"{live_server.url}/workspaces/acme/health/")
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#resource-refusals")))
        wait.until(
            lambda d: all(
                "plot-ready" in element.get_attribute("class")
                for element in d.find_elements(By.CSS_SELECTOR, "[data-figure]")
            )
        )
        table = driver.find_element(By.ID, "resource-table")
        rows = {
            row.get_attribute("data-resource"): row
            for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")
        }
        assert list(rows) == ["browser", "db:test", LONG]
        db = rows["db:test"]
        assert db.find_element(By.CSS_SELECTOR, ".in-use").text.startswith("1 of 1")
        assert "at-cap" in db.get_attribute("class")
        assert db.find_element(By.CSS_SELECTOR, ".waiting").text == "1"
        assert db.find_element(By.CSS_SELECTOR, ".refused").text == "8"  # 3 now, 5 before
        pool = rows[LONG]
        assert pool.find_element(By.CSS_SELECTOR, ".in-use").text.startswith("11 of 12")
        holders = pool.find_elements(By.CSS_SELECTOR, ".resource-holder")
        assert [h.find_element(By.TAG_NAME, "a").text for h in holders] == [
            "release-manager-0001",
            "coder-1",
        ]
        assert "slots 0\u20137" in holders[0].text and "slots 8\u201310" in holders[1].text
        # The chart: a bar trace per resource, the refusals of every day of the window.
        traces = driver.execute_script(
            "return document.getElementById('resource-refusals').data"
            ".map(t => [t.name, t.y.reduce((a, b) => a + b, 0)])"
        )
        assert sorted(traces) == sorted([["browser", 0], ["db:test", 8], [LONG, 2]])
        # Laid out whole: the table inside its card, nothing wider than the window.
        card = driver.find_element(By.CSS_SELECTOR, "#resources > section").rect
        if width > 700:  # on a phone the table scrolls inside its card, as every table
            assert table.rect["x"] + table.rect["width"] <= card["x"] + card["width"] + 1
        assert fits(driver), f"the health page scrolls sideways at {width} px"
        driver.execute_script("document.getElementById('resources').scrollIntoView()")
        driver.find_element(By.ID, "resources").screenshot(f"/tmp/resources-section-{width}.png")
        full_page(driver, f"/tmp/resources-health-{width}.png")

        agent = holders[1].find_element(By.LINK_TEXT, "coder-1")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", agent)
        agent.click()
        held = wait.until(ec.visibility_of_element_located((By.ID, "agent-resources")))
        lines = [row.text for row in held.find_elements(By.CSS_SELECTOR, "tbody tr")]
        assert len(lines) == 2 and lines[0].startswith("db:test 1 (slot 0)"), lines
        assert lines[1].startswith(f"{LONG} 3 (slots 8\u201310)"), lines
        assert fits(driver), f"the agent page scrolls sideways at {width} px"
        driver.find_element(By.ID, "holdings").screenshot(f"/tmp/resources-holdings-{width}.png")
        full_page(driver, f"/tmp/resources-agent-{width}.png")

        issue = held.find_element(By.LINK_TEXT, f"#{fleet['fix'].pk}")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", issue)
        issue.click()
        holds = wait.until(ec.visibility_of_element_located((By.ID, "resource-holds")))
        names = [cell.text for cell in holds.find_elements(By.CSS_SELECTOR, "tbody td code")]
        assert names == ["db:test", LONG]
        kinds = {
            entry.get_attribute("data-kind")
            for entry in driver.find_elements(By.CSS_SELECTOR, "#timeline li")
        }
        assert {"resource.acquired"} <= kinds, kinds
        assert fits(driver), f"the issue page scrolls sideways at {width} px"
        driver.find_element(By.ID, "holds").screenshot(f"/tmp/resources-holds-{width}.png")
        full_page(driver, f"/tmp/resources-issue-{width}.png")

    assert not [
        entry
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE" and "favicon" not in entry["message"]
    ]
