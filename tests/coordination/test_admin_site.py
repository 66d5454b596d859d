"""The admin site's index is the operators' dashboard; in a real browser, the dashboard
then a force-release."""

import pytest
from django.urls import reverse

from coordination.models import ClaimConflict, IssueLease, Message, Run
from coordination.services import leases
from tests.conftest import BROWSER_WAIT, password_of


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
