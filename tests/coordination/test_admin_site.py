"""The operators' admin in a real browser: the dashboard, then a force-release."""

import pytest
from django.contrib.auth import get_user_model

from coordination.models import IssueLease, Message
from coordination.services import leases
from tests.conftest import BROWSER_WAIT

pytestmark = pytest.mark.django_db(transaction=True)


def test_operator_reads_the_dashboard_and_force_releases_a_lease(
    browser, live_server, tmp_path, workspace, issue, make_session
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    get_user_model().objects.create_user(
        "ops", password="ops-pw-123", is_staff=True, is_superuser=True
    )
    session = make_session("coder-7")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk).lease
    driver, wait = browser, WebDriverWait(browser, BROWSER_WAIT)

    driver.get(f"{live_server.url}/admin/")
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys("ops")
    driver.find_element(By.NAME, "password").send_keys("ops-pw-123")
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
