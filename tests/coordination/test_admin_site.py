"""The admin site's index is the operators' dashboard; in a real browser, the dashboard
then a force-release, and every list and page at a laptop's width."""

import base64
import os
from pathlib import Path

import pytest
from django.contrib import admin
from django.urls import reverse

from coordination.models import AgentSession, ClaimConflict, Issue, IssueLease, Message, Run
from coordination.services import leases
from tests.conftest import BROWSER_WAIT, password_of
from tests.coordination.admin_helpers import crowd, url

COORDINATION_MODELS = [
    model for model in admin.site._registry if model._meta.app_label == "coordination"
]


@pytest.mark.django_db
def test_index_is_the_fleet_dashboard(operator, workspace, project, make_issue, make_session):
    live = make_session()
    leases.claim_issue(workspace=workspace, issue_id=make_issue().pk, session_id=live.pk)
    ClaimConflict.objects.create(
        workspace=workspace,
        path="x.py",
        rejected_issue=make_issue(),
        holding_issue=make_issue(),
        forced=True,
    )
    skipped = Run.objects.create(
        workspace=workspace,
        issue=make_issue(),
        status="skipped",
        error="worktree_unresolved",
        error_detail="Bind a worktree.",
    )
    response = operator.get(reverse("admin:index"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Projektor operations" in html and 'href="/workspaces/"' in html
    (board,) = response.context["dashboards"]
    assert (board.live_agents, board.rejected, board.forced, board.denials) == (1, 0, 1, 0)
    assert [(load.key, load.live, load.limit) for load in board.loads] == [("core", 1, 3)]
    assert board.troubled_runs == [skipped] and "Bind a worktree." in html
    assert "/workspaces/acme/heatmap/" in html and "/workspaces/acme/health/" in html


@pytest.mark.django_db(transaction=True)
def test_operator_reads_the_dashboard_and_force_releases_a_lease(
    browser, live_server, tmp_path, ops, workspace, issue, make_session
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    session = make_session("coder-7")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk).lease
    driver, wait = browser, WebDriverWait(browser, BROWSER_WAIT)

    driver.get(f"{live_server.url}/admin/")
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys("ops")
    driver.find_element(By.NAME, "password").send_keys(password_of(ops.username))
    driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()

    board = wait.until(
        ec.presence_of_element_located((By.CSS_SELECTOR, '#dashboard [data-workspace="acme"]'))
    )
    assert board.find_element(By.CSS_SELECTOR, ".live-agents").text == "1"
    assert "1 / 3" in board.find_element(By.CSS_SELECTOR, "table.loads").text
    assert "Projektor operations" in driver.find_element(By.ID, "site-name").text
    driver.save_screenshot(str(tmp_path / "dashboard.png"))

    driver.get(f"{live_server.url}/admin/coordination/issuelease/?holder=live")
    row = wait.until(
        ec.presence_of_element_located(
            (By.CSS_SELECTOR, f'input[name="_selected_action"][value="{lease.pk}"]')
        )
    )
    row.click()
    Select(driver.find_element(By.NAME, "action")).select_by_value("force_release")
    driver.find_element(By.CSS_SELECTOR, "button[name=index]").click()

    message = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "ul.messagelist li")))
    assert f"Force-released 1: lease {lease.pk} on issue {issue.pk}" in message.text
    driver.save_screenshot(str(tmp_path / "force-released.png"))
    assert IssueLease.objects.get(pk=lease.pk).release_reason == "overridden"
    assert Message.objects.filter(scope=f"issue:{issue.pk}", body__contains="ops").exists()


# --- every list fits a laptop ---------------------------------------------------------

LAPTOP = 1280  # px: the window every changelist must fit without scrolling sideways
WIDTHS = """
const page = document.documentElement, table = document.getElementById('result_list');
return {page: [page.scrollWidth, page.clientWidth], window: window.innerWidth,
        table: table ? [table.scrollWidth, table.parentElement.clientWidth] : null};
"""


def fits(widths: list[int]) -> bool:
    """[scrollWidth, clientWidth]: nothing to scroll sideways."""
    scrolled, shown = widths
    return scrolled <= shown


def screenshots(tmp_path: Path) -> Path:
    """Where the screenshots go: ``PROJEKTOR_SCREENSHOTS`` if set, else the test's tmp."""
    chosen = os.environ.get("PROJEKTOR_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def save_page(driver, path: Path) -> None:
    """The whole page, not only the window: Chromium's capture beyond the viewport."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    path.write_bytes(base64.b64decode(shot["data"]))


def log_in(driver, live_server, user) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{live_server.url}/admin/")
    wait = WebDriverWait(driver, BROWSER_WAIT)
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys(user.username)
    driver.find_element(By.NAME, "password").send_keys(password_of(user.username))
    driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait.until(ec.presence_of_element_located((By.ID, "dashboard")))


@pytest.mark.django_db(transaction=True)
def test_every_coordination_list_fits_a_laptop_window(
    browser, live_server, tmp_path, ops, workspace
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    shown = crowd(workspace)
    folder = screenshots(tmp_path)
    browser.set_window_size(LAPTOP, 900)
    log_in(browser, live_server, ops)

    too_wide = {}
    for model in COORDINATION_MODELS:
        browser.get(live_server.url + url(model))
        browser.find_element(By.ID, "result_list")  # the list is there, rows and all
        widths = browser.execute_script(WIDTHS)
        assert widths["window"] == LAPTOP
        save_page(browser, folder / f"{model._meta.model_name}.png")
        if not (fits(widths["page"]) and fits(widths["table"])):
            too_wide[model.__name__] = widths
    assert too_wide == {}

    session = shown["stale"]
    browser.get(live_server.url + url(AgentSession, "change", session.pk))
    title = browser.find_element(By.CSS_SELECTOR, "#content h2").text
    assert title == f"{session.agent.name} · session {session.pk}"
    assert browser.find_element(By.CSS_SELECTOR, ".field-state .state").text == "stale"
    held = "\n".join(box.text for box in browser.find_elements(By.CSS_SELECTOR, ".holdings"))
    assert "held" in held and "_of_the_fleet.py" in held
    assert fits(browser.execute_script(WIDTHS)["page"])
    save_page(browser, folder / "session-page.png")

    issue = shown["reported"]
    browser.get(live_server.url + url(Issue, "change", issue.pk))
    moves = [
        b.get_attribute("value") for b in browser.find_elements(By.CSS_SELECTOR, "button.move")
    ]
    assert moves == ["in_progress", "done", "cancelled"]
    panels = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".coordination-panel h2")]
    assert panels == ["Held file claims", "Recent conflicts", "Recent messages"]
    assert "Columns merged" in browser.find_element(By.CSS_SELECTOR, ".field-summary").text
    assert fits(browser.execute_script(WIDTHS)["page"])
    save_page(browser, folder / "issue-page.png")

    browser.find_element(By.CSS_SELECTOR, 'button.move[value="done"]').click()
    message = WebDriverWait(browser, BROWSER_WAIT).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "ul.messagelist li"))
    )
    assert f"Moved to done 1: #{issue.pk}" in message.text
    assert Issue.objects.get(pk=issue.pk).status == "done"
