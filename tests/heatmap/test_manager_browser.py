"""The board with many held paths, and a review from the issue page, in a real
browser. Screenshots are kept at /tmp/board-cards.png and /tmp/issue-accepted.png."""

import pytest

from coordination.models import Event, EventType, Issue
from coordination.services import file_claims, graph
from tests.conftest import BROWSER_WAIT, password_of

pytestmark = pytest.mark.django_db(transaction=True)
S = Issue.Status

CARDS = 12
PATHS_PER_CARD = 8
# At 1400 px wide a card listing all eight paths is ~430 px tall; three and "+5 more"
# ~225 px.
CARD_MAX_HEIGHT = 260

# Where each character of a path's <code> was drawn: a line starts below the last.
# Returns the characters after which a line broke.
BROKEN_AFTER = """
const code = arguments[0];
const breaks = [];
let previous = null, top = null;
const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  for (let i = 0; i < node.length; i++) {
    const range = document.createRange();
    range.setStart(node, i); range.setEnd(node, i + 1);
    const rect = range.getClientRects()[0];
    if (!rect) continue;
    if (top !== null && rect.top > top + 2) breaks.push(previous);
    top = rect.top; previous = node.data[i];
  }
}
return breaks;
"""


def log_in(driver, wait, url, username):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    driver.get(f"{url}/")
    wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys(username)
    driver.find_element(By.NAME, "password").send_keys(password_of(username))
    driver.find_element(By.CSS_SELECTOR, "form.stack button[type=submit]").click()
    wait.until(ec.presence_of_element_located((By.LINK_TEXT, "Issues")))


@pytest.fixture
def crowded(workspace, make_issue, make_session):
    """Cards wanting eight long paths each, all held by one issue in progress."""
    paths = [f"src/web/components/widgets/HeatmapLegend{n}.tsx" for n in range(PATHS_PER_CARD)]
    holder = make_issue(title="Holds the widgets", status=S.IN_PROGRESS)
    file_claims.claim_files(
        workspace=workspace, issue_id=holder.pk, paths=paths, session_id=make_session("atlas").pk
    )
    for n in range(CARDS):
        wanting = make_issue(title=f"Polish widget {n}", status=S.TODO)
        graph.set_expected_paths(issue=wanting, paths=paths)
    make_issue(title="Dropped", status=S.CANCELLED)
    return paths


def test_board_cards_stay_short_and_paths_wrap_between_segments(
    browser, live_server, alice, crowded
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver, wait = browser, WebDriverWait(browser, BROWSER_WAIT)
    driver.set_window_size(1400, 900)
    log_in(driver, wait, live_server.url, "alice")
    driver.get(f"{live_server.url}/workspaces/acme/issues/")
    wait.until(ec.presence_of_element_located((By.ID, "board")))

    cards = driver.find_elements(By.CSS_SELECTOR, "[data-status=todo] .issue-card")
    assert len(cards) == CARDS
    for card in cards:
        assert card.rect["height"] <= CARD_MAX_HEIGHT, card.rect
        assert card.find_element(By.CSS_SELECTOR, "a.more-paths").text == "+5 more"
        codes = card.find_elements(By.CSS_SELECTOR, ".held-files code")
        assert len(codes) == 3
        for code in codes:
            assert set(driver.execute_script(BROKEN_AFTER, code)) <= {"/"}, code.text
    # The folded columns' marks stand apart from their labels, on the same line.
    for label in driver.find_elements(By.CSS_SELECTOR, ".column.folded h2 .label"):
        mark = label.find_element(By.CSS_SELECTOR, ".fold .closed")
        words = driver.execute_script(
            # The label's first letter, after the mark and the space.
            "const text = arguments[0].querySelector('.fold').nextSibling;"
            "const r = document.createRange(); r.setStart(text, 1); r.setEnd(text, 2);"
            "const b = r.getClientRects()[0]; return {left: b.left, top: b.top};",
            label,
        )
        assert words["left"] - (mark.rect["x"] + mark.rect["width"]) >= 2, label.text
        assert abs(words["top"] - mark.rect["y"]) < mark.rect["height"], label.text
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, height)
    driver.save_screenshot("/tmp/board-cards.png")
    assert height < 3600, height  # twelve cards listing every path: over 5,300 px


def test_a_member_accepts_work_in_review_from_the_issue_page(
    browser, live_server, alice, make_issue
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    issue = make_issue(title="Ready for a look", status=S.IN_REVIEW)
    driver, wait = browser, WebDriverWait(browser, BROWSER_WAIT)
    log_in(driver, wait, live_server.url, "alice")
    driver.get(f"{live_server.url}/workspaces/acme/issues/{issue.pk}/")

    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "#accept-form button"))).click()

    wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, "#facts .tag.status"), "Done"))
    assert not driver.find_elements(By.ID, "review")
    entry = driver.find_element(By.CSS_SELECTOR, "#timeline .entry")
    assert "done" in entry.text
    driver.save_screenshot("/tmp/issue-accepted.png")
    issue.refresh_from_db()
    assert issue.status == S.DONE
    event = Event.objects.get(issue=issue, type=EventType.ISSUE_TRANSITIONED)
    assert event.data["operator"] == "alice"
