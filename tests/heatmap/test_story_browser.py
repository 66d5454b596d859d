"""A manager follows the heat to its story in a real browser, on the demo's data: the
heatmap's hottest path → its page → an issue that collides on it → its timeline → an
agent, by clicking links, on a desktop and on a 390 px phone. Screenshots are saved
under the test's tmp dir."""

from io import StringIO

import pytest
from django.core.management import call_command

from tests.conftest import BROWSER_WAIT

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = (1400, 390)


def full_page(driver, path) -> None:
    """A screenshot of the whole page at the window's width."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    width = driver.get_window_size()["width"]
    driver.set_window_size(width, min(height + 140, 6000))
    driver.save_screenshot(str(path))


def fits(driver) -> bool:
    """Nothing wider than the window: no sideways scrolling of the page."""
    return driver.execute_script(
        "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )


def test_manager_clicks_from_the_hottest_path_to_an_agent(browser, live_server, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    call_command(
        "seed_demo", "--agents", "6", "--days", "4", "--password", "manager-pw", stdout=StringIO()
    )
    driver = browser
    wait = WebDriverWait(driver, BROWSER_WAIT)
    driver.get(f"{live_server.url}/login/")
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys("manager")
    driver.find_element(By.NAME, "password").send_keys("manager-pw")
    driver.find_element(By.CSS_SELECTOR, "form.stack button[type=submit]").click()
    wait.until(ec.presence_of_element_located((By.LINK_TEXT, "Heatmap")))

    for width in WIDTHS:
        driver.set_window_size(width, 1000)
        driver.get(f"{live_server.url}/workspaces/demo/heatmap/?mode=contention")
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#treemap.plot-ready")))
        assert fits(driver), f"the heatmap scrolls sideways at {width} px"
        menu = driver.find_element(By.CSS_SELECTOR, "header.topbar")
        assert menu.find_element(By.LINK_TEXT, "Issues").is_displayed()
        full_page(driver, tmp_path / f"1-heatmap-{width}.png")
        driver.set_window_size(width, 1000)

        hottest = driver.find_element(By.CSS_SELECTOR, "#hottest tbody a")
        path = hottest.text
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", hottest)
        hottest.click()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#path-conflicts.plot-ready")))
        assert driver.find_element(By.CSS_SELECTOR, "h1 code").text == path
        assert fits(driver), f"the path page scrolls sideways at {width} px"
        full_page(driver, tmp_path / f"2-path-{width}.png")
        driver.set_window_size(width, 1000)

        issue_link = driver.find_element(By.CSS_SELECTOR, "#path-pairs tbody a")
        issue_id = issue_link.text.split()[0]
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", issue_link)
        issue_link.click()
        wait.until(ec.presence_of_element_located((By.ID, "timeline")))
        assert driver.find_element(By.ID, "issue-title").text.startswith(issue_id)
        kinds = {
            entry.get_attribute("data-kind")
            for entry in driver.find_elements(By.CSS_SELECTOR, "#timeline li")
        }
        assert kinds & {"claims.refused", "conflict"}, kinds  # the collision is in its story
        assert fits(driver), f"the issue page scrolls sideways at {width} px"
        full_page(driver, tmp_path / f"3-issue-{width}.png")
        driver.set_window_size(width, 1000)

        agent_link = driver.find_element(By.CSS_SELECTOR, "#timeline a[href*='/agents/']")
        agent = agent_link.text
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", agent_link)
        agent_link.click()
        wait.until(ec.presence_of_element_located((By.ID, "sessions")))
        assert driver.find_element(By.ID, "agent-name").text == agent
        assert fits(driver), f"the agent page scrolls sideways at {width} px"
        full_page(driver, tmp_path / f"4-agent-{width}.png")
        driver.set_window_size(width, 1000)

        driver.find_element(By.LINK_TEXT, "Issues").click()
        wait.until(ec.presence_of_element_located((By.ID, "board")))
        columns = driver.find_elements(By.CSS_SELECTOR, "#board .column")
        assert len(columns) == 6
        assert fits(driver), f"the board scrolls sideways at {width} px"
        full_page(driver, tmp_path / f"5-board-{width}.png")

    assert not [
        entry
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE" and "favicon" not in entry["message"]
    ]
