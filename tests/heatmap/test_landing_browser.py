"""The landing queue in a real browser (invariant 21 (the default branch is always
green)): the health page's section, a board card's place in line and an issue page's
entries (a rejection's check output shown to its last line), laid out within the page on
a desktop and a phone. Entries made by the landing services. Screenshots are kept at
/tmp/landings-<page>-<width>.png."""

import pytest

from tests.conftest import BROWSER_WAIT, password_of
from tests.heatmap.test_landing_pages import build_lot, queuer

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = (1400, 390)


def fits(driver) -> bool:
    return driver.execute_script(
        "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )


def test_a_manager_reads_the_landing_queue(
    browser, live_server, alice, workspace, project, make_issue, make_session
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    lot = build_lot(workspace, queuer(workspace, project, make_issue, make_session), make_session)
    driver, wait = browser, WebDriverWait(browser, BROWSER_WAIT)
    driver.get(f"{live_server.url}/")
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys("alice")
    driver.find_element(By.NAME, "password").send_keys(password_of("alice"))
    driver.find_element(By.CSS_SELECTOR, "form.stack button[type=submit]").click()
    wait.until(ec.element_to_be_clickable((By.LINK_TEXT, "Health")))

    for width in WIDTHS:
        driver.set_window_size(width, 1000)
        driver.get(f"{live_server.url}/workspaces/acme/health/")
        section = wait.until(ec.visibility_of_element_located((By.ID, "landings")))
        row = section.find_element(By.CSS_SELECTOR, "#landing-queues tr[data-project=core]")
        assert row.find_element(By.CSS_SELECTOR, ".depth").text.startswith("2")
        assert row.find_element(By.LINK_TEXT, "tester-1").is_displayed()
        assert section.find_element(By.CSS_SELECTOR, "#landing-days tbody tr").is_displayed()
        assert fits(driver), f"the health page scrolls sideways at {width} px"
        driver.execute_script("arguments[0].scrollIntoView()", section)
        driver.save_screenshot(f"/tmp/landings-health-{width}.png")

        driver.get(f"{live_server.url}/workspaces/acme/issues/")
        card = wait.until(
            ec.visibility_of_element_located(
                (By.CSS_SELECTOR, f'.issue-card[data-issue="{lot["waiting"].issue_id}"]')
            )
        )
        assert card.find_element(By.CSS_SELECTOR, ".tag.landing").text == "landing: queued, 2nd"
        assert fits(driver), f"the board scrolls sideways at {width} px"

        driver.get(f"{live_server.url}/workspaces/acme/issues/{lot['red'].issue_id}/")
        detail = wait.until(
            ec.visibility_of_element_located((By.CSS_SELECTOR, "pre.landing-detail"))
        )
        driver.execute_script("arguments[0].scrollIntoView()", detail)
        # The whole tail is drawn: the box is as tall as its text, its last line shown.
        assert detail.text.endswith("FAILED check_login: NameError")
        assert driver.execute_script(
            "return arguments[0].scrollHeight <= arguments[0].clientHeight + 1", detail
        )
        assert fits(driver), f"the issue page scrolls sideways at {width} px"
        driver.save_screenshot(f"/tmp/landings-issue-{width}.png")
