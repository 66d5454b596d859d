"""The managers' pages in a real browser (the ``browser`` fixture of tests/conftest.py).
Screenshots are saved under the test's tmp dir."""

from io import StringIO

import pytest
from django.core.management import call_command

from coordination.models import Resource
from tests.conftest import BROWSER_WAIT

pytestmark = pytest.mark.django_db(transaction=True)


def test_manager_logs_in_drills_into_the_heatmap_and_reads_health(browser, live_server, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    call_command(
        "seed_demo", "--agents", "6", "--days", "4", "--password", "manager-pw", stdout=StringIO()
    )
    driver = browser
    wait = WebDriverWait(driver, BROWSER_WAIT)

    driver.get(f"{live_server.url}/")
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys("manager")
    driver.find_element(By.NAME, "password").send_keys("manager-pw")
    driver.find_element(By.CSS_SELECTOR, "form.stack button[type=submit]").click()
    # The login page's own URL names /workspaces/ (?next=), so wait for the list itself.
    wait.until(ec.element_to_be_clickable((By.LINK_TEXT, "Heatmap"))).click()

    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#treemap.plot-ready")))
    labels = [
        element.text for element in driver.find_elements(By.CSS_SELECTOR, "#treemap text.slicetext")
    ]
    assert any(label.startswith("src/") for label in labels), labels
    driver.save_screenshot(str(tmp_path / "heatmap.png"))

    # Click the header strip of the src/ tile (its top-left corner), not a child tile.
    tile = next(
        group.find_element(By.CSS_SELECTOR, "path.surface")
        for group in driver.find_elements(By.CSS_SELECTOR, "#treemap g.slice")
        if group.text.startswith("src/")
    )
    width, height = tile.rect["width"], tile.rect["height"]
    ActionChains(driver).move_to_element_with_offset(
        tile, -width / 2 + 6, -height / 2 + 6
    ).click().perform()
    wait.until(ec.url_contains("prefix=src"))
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#treemap.plot-ready")))
    crumbs = driver.find_element(By.ID, "breadcrumb")
    assert crumbs.find_element(By.CSS_SELECTOR, "[aria-current]").text == "src"
    assert crumbs.find_element(By.LINK_TEXT, "all paths")
    drawn_ids = driver.execute_script("return document.getElementById('treemap').data[0].ids")
    assert drawn_ids[0] == "/" and all(path.startswith("src/") for path in drawn_ids[1:])
    driver.save_screenshot(str(tmp_path / "heatmap-src.png"))
    crumbs.find_element(By.LINK_TEXT, "all paths").click()
    wait.until(lambda d: "prefix=" not in d.current_url)

    driver.find_element(By.LINK_TEXT, "Health").click()
    wait.until(ec.url_contains("/health/"))
    wait.until(
        lambda d: (
            d.find_elements(By.CSS_SELECTOR, "[data-figure]")
            and all(
                "plot-ready" in element.get_attribute("class")
                for element in d.find_elements(By.CSS_SELECTOR, "[data-figure]")
            )
        )
    )
    plots = driver.find_elements(By.CSS_SELECTOR, "[data-figure] svg.main-svg")
    # The load, four daily series, and the resources' refusals when the demo has some.
    expected = 5 + Resource.objects.filter(workspace__slug="demo").exists()
    assert len(driver.find_elements(By.CSS_SELECTOR, "[data-figure]")) == expected
    assert len(plots) >= expected
    assert driver.find_elements(By.CSS_SELECTOR, "#chart-conflicts g.trace.bars path")
    driver.set_window_size(1400, driver.execute_script("return document.body.scrollHeight"))
    driver.save_screenshot(str(tmp_path / "health.png"))
    assert not [
        entry
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE" and "favicon" not in entry["message"]
    ]
