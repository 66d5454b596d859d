"""A stalled agent on the health page in a real browser (invariant 17 (stalled is derived)): counted
in the figures, listed with how long it has stalled, its last note and what it holds, and
the page laid out whole. The screenshot is kept at /tmp/health-stalled.png."""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.models import AgentSession
from coordination.services import agents, leases
from tests.conftest import BROWSER_WAIT, password_of

pytestmark = pytest.mark.django_db(transaction=True)

SCREENSHOT = "/tmp/health-stalled.png"


@pytest.fixture
def stuck(workspace, make_issue, make_session, settings):
    """coder-1 holds two issues and has made no progress for 25 minutes, over a
    threshold of 10; coder-2 is live and moving."""
    settings.PROJEKTOR_STALL_AFTER_SECONDS = 600
    session = make_session("coder-1")
    held = [make_issue(title="Fix the flaky login test"), make_issue(title="Retry the upload")]
    for issue in held:
        leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    agents.report_progress(workspace=workspace, session_id=session.pk, note="rerunning tests")
    stamp = timezone.now() - timedelta(minutes=25)
    AgentSession.objects.filter(pk=session.pk).update(last_progress_at=stamp)
    make_session("coder-2")
    return session, held


def test_the_health_page_shows_a_stalled_agent_and_what_it_holds(
    browser, live_server, alice, stuck
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    session, held = stuck
    driver, wait = browser, WebDriverWait(browser, BROWSER_WAIT)
    driver.get(f"{live_server.url}/")
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys("alice")
    driver.find_element(By.NAME, "password").send_keys(password_of("alice"))
    driver.find_element(By.CSS_SELECTOR, "form.stack button[type=submit]").click()
    wait.until(ec.element_to_be_clickable((By.LINK_TEXT, "Health"))).click()

    section = wait.until(ec.visibility_of_element_located((By.ID, "stalled-agents")))
    wait.until(
        lambda d: all(
            "plot-ready" in element.get_attribute("class")
            for element in d.find_elements(By.CSS_SELECTOR, "[data-figure]")
        )
    )
    figure = driver.find_element(By.CSS_SELECTOR, "#stalled-count .value")
    assert figure.text == "1"
    assert "bad" in driver.find_element(By.ID, "stalled-count").get_attribute("class")
    assert "no progress for 10 minutes" in section.text
    [row] = section.find_elements(By.CSS_SELECTOR, "tbody tr")
    cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
    assert [cells[0], cells[1], cells[3]] == ["coder-1", str(session.pk), "rerunning tests"]
    minutes, unit = cells[2].split()  # 25, or more on a slow machine
    assert int(minutes) >= 25 and unit == "minutes", cells
    links = row.find_elements(By.CSS_SELECTOR, "td:last-child a")
    assert [link.text for link in links] == [f"#{issue.pk} {issue.title}" for issue in held]
    assert links[0].get_attribute("href").endswith(f"/issues/{held[0].pk}/")
    # In the live agents too, marked stalled; the moving one not.
    marked = {
        row.find_element(By.TAG_NAME, "a").text: row.find_elements(By.CSS_SELECTOR, ".tag.bad")
        for row in driver.find_elements(By.CSS_SELECTOR, "#live-agents tbody tr")
    }
    assert [tag.text for tag in marked["coder-1"]] == ["stalled"] and marked["coder-2"] == []
    # Laid out whole: the table fits its card, nothing spills past the page's width.
    card, table = section.rect, section.find_element(By.TAG_NAME, "table").rect
    assert table["x"] + table["width"] <= card["x"] + card["width"] + 1, (card, table)
    page_width = driver.execute_script("return document.documentElement.scrollWidth")
    assert page_width <= driver.execute_script("return window.innerWidth"), page_width

    driver.set_window_size(1400, driver.execute_script("return document.body.scrollHeight"))
    driver.save_screenshot(SCREENSHOT)
    assert not [
        entry
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE" and "favicon" not in entry["message"]
    ]
