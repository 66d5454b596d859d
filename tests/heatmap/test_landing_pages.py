"""The landing queue on the managers' pages (invariant 21 (the default branch is always
green)): the board's cards and the issue page show an issue's open entry and its place,
the issue page its entries' history, the health page each project's queue now, who
tests its batch, and per day what landed and what was rejected, with the waits. Real
entries, made through the landing services, on both databases (the suite runs on each)."""

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from coordination.models import Landing
from coordination.services import landings
from heatmap.landings import detail_tail, percentile, wait_words
from heatmap.templatetags.story import ordinal
from tests.conftest import expire
from tests.coordination.landing_helpers import queue_work

pytestmark = pytest.mark.django_db

LANDED = "fedcba9876543210fedcba9876543210fedcba98"
CHECK_OUTPUT = "\n".join(f"line {n}" for n in range(1, 41)) + "\nFAILED check_login: NameError"


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


def queuer(workspace, project, make_issue, make_session):
    """``queue(title, paths, agent)``: a new issue leased by a session of its own, its
    paths claimed, queued through the services; returns the entry and its session."""
    project.agent_wip_limit = 50
    project.save()

    def queue_one(title: str, paths: list[str], agent: str) -> tuple[Landing, Any]:
        issue = make_issue(title=title)
        session = make_session(agent)
        entry = queue_work(
            issue,
            session,
            paths=paths,
            branch=f"projektor/{issue.pk}-{agent}",
            commit="0123456789abcdef0123456789abcdef01234567",
        )
        return entry, session

    return queue_one


def build_lot(workspace, queue, make_session) -> dict[str, Any]:
    """core's queue, by the services: #landed (landed), #red (rejected check_failed),
    #gone (rejected stale_fence: its session died), #tested (testing by ``tester``),
    #waiting (queued, 2nd)."""
    tester = make_session("tester-1")
    landed, _ = queue("Add the login page", ["src/login.py"], "coder-1")
    red, _ = queue("Rename the session helper", ["src/session.py"], "coder-2")
    batch = landings.take_batch(workspace=workspace, project_key="core", session_id=tester.pk)
    assert [entry.pk for entry in batch.entries] == [landed.pk, red.pk]
    landings.land(
        workspace=workspace,
        landing_id=landed.pk,
        session_id=tester.pk,
        fence=batch.fence,
        commit=LANDED,
    )
    landings.reject(
        workspace=workspace,
        landing_id=red.pk,
        session_id=tester.pk,
        fence=batch.fence,
        reason="check_failed",
        detail=CHECK_OUTPUT,
    )
    gone, gone_session = queue("Fix the flaky test", [], "coder-3")
    expire(gone_session)
    tested, _ = queue("Cache the board", [], "coder-4")
    waiting, _ = queue("Speed up the heatmap", [], "coder-5")
    batch = landings.take_batch(workspace=workspace, project_key="core", session_id=tester.pk)
    assert [entry.pk for entry in batch.entries] == [tested.pk]
    entries = {"landed": landed, "red": red, "gone": gone, "tested": tested, "waiting": waiting}
    return {name: Landing.objects.get(pk=entry.pk) for name, entry in entries.items()} | {
        "tester": tester
    }


@pytest.fixture
def queue(workspace, project, make_issue, make_session):
    return queuer(workspace, project, make_issue, make_session)


@pytest.fixture
def lot(workspace, queue, make_session):
    return build_lot(workspace, queue, make_session)


# --- the board and the issue page ------------------------------------------------------------


def card(body: str, issue_id: int) -> str:
    match = re.search(
        rf'<article class="issue-card" data-issue="{issue_id}">(.*?)</article>', body, re.S
    )
    assert match, f"no card for #{issue_id}"
    return match.group(1)


def test_the_board_shows_an_issue_s_open_entry_and_its_place(alice, workspace, lot):
    body = logged_in(alice).get("/workspaces/acme/issues/").content.decode()
    assert "landing: testing" in text(card(body, lot["tested"].issue_id))
    assert "landing: queued, 2nd" in text(card(body, lot["waiting"].issue_id))
    for closed in ("landed", "red", "gone"):  # no open entry: no landing tag
        assert "landing:" not in card(body, lot[closed].issue_id)


def test_the_issue_page_shows_the_open_entry_and_the_history(alice, workspace, queue, lot):
    client = logged_in(alice)
    body = client.get(f"/workspaces/acme/issues/{lot['waiting'].issue_id}/").content.decode()
    now = text(body[body.index('id="landing-now"') :].split("</p>")[0])
    assert "landing: queued, 2nd" in now and "1 entry ahead" in now

    body = client.get(f"/workspaces/acme/issues/{lot['tested'].issue_id}/").content.decode()
    now = body[body.index('id="landing-now"') :].split("</p>")[0]
    assert "landing: testing" in text(now) and 'href="/workspaces/acme/agents/tester-1/"' in now

    body = client.get(f"/workspaces/acme/issues/{lot['landed'].issue_id}/").content.decode()
    assert "No entry open" in body
    row = body[body.index(f'data-landing="{lot["landed"].pk}"') :].split("</tr>")[0]
    assert "landed as" in text(row) and f">{LANDED[:12]}<" in row and LANDED[:13] not in text(row)

    body = client.get(f"/workspaces/acme/issues/{lot['red'].issue_id}/").content.decode()
    row = body[body.index(f'data-landing="{lot["red"].pk}"') :].split("</tr>")[0]
    assert "rejected" in text(row) and "check_failed" in row
    below = body[body.index(f'data-detail-of="{lot["red"].pk}"') :].split("</tr>")[0]
    shown = re.search(r'<pre class="landing-detail"[^>]*>(.*?)</pre>', below, re.S).group(1)
    assert shown.endswith("FAILED check_login: NameError")
    assert "line 40" in shown and "line 20\n" not in shown  # its last lines only

    timeline, red_id = text(body[body.index('id="timeline"') :]), lot["red"].pk
    assert f"Landing entry {red_id} rejected check_failed by tester-1" in timeline
    assert f"Landing entry {red_id} under test by tester-1" in timeline

    body = client.get(f"/workspaces/acme/issues/{lot['landed'].issue_id}/").content.decode()
    timeline = text(body[body.index('id="timeline"') :])
    assert f"Landed (entry {lot['landed'].pk}) as {LANDED[:12]} by tester-1" in timeline
    assert f"coder-1 queued projektor/{lot['landed'].issue_id}-coder-1 at 0123456789ab" in timeline

    body = client.get(f"/workspaces/acme/issues/{lot['gone'].issue_id}/").content.decode()
    row = body[body.index(f'data-landing="{lot["gone"].pk}"') :].split("</tr>")[0]
    below = body[body.index(f'data-detail-of="{lot["gone"].pk}"') :].split("</tr>")[0]
    assert "stale_fence" in row and "no longer the issue" in below


def test_the_timeline_says_why_an_entry_went_back_in_line(alice, workspace, queue, make_session):
    """Returned by its own tester, or put back by the take that followed a dead one."""
    first, _ = queue("Add the login page", ["src/login.py"], "coder-1")
    second, _ = queue("Rename the session helper", ["src/session.py"], "coder-2")
    tester, heir = make_session("tester-1"), make_session("tester-2")
    take = landings.take_batch
    batch = take(workspace=workspace, project_key="core", session_id=tester.pk)
    landings.return_batch(workspace=workspace, session_id=tester.pk, fence=batch.fence)
    dead = take(workspace=workspace, project_key="core", session_id=tester.pk)
    expire(tester)
    take(workspace=workspace, project_key="core", session_id=heir.pk, max_entries=1)

    client = logged_in(alice)
    body = client.get(f"/workspaces/acme/issues/{second.issue_id}/").content.decode()
    timeline = text(body[body.index('id="timeline"') :])
    assert (
        f"Landing entry {second.pk} back in line: its batch (fence {batch.fence}) was"
        " returned by tester-1"
    ) in timeline
    assert (
        f"Landing entry {second.pk} back in line: its tester stopped heartbeating (batch"
        f" fence {dead.fence}); put back by the next take, tester-2"
    ) in timeline


def test_an_issue_never_queued_has_no_landing_section(alice, workspace, make_issue):
    issue = make_issue()
    body = logged_in(alice).get(f"/workspaces/acme/issues/{issue.pk}/").content.decode()
    assert 'id="landing"' not in body


# --- the health page ---------------------------------------------------------------------------


def section(body: str) -> str:
    start = body.index('id="landings"')
    return body[start : body.index("</section>", start)]


def test_health_shows_each_queue_its_tester_and_the_day_s_outcomes(alice, workspace, lot):
    response = logged_in(alice).get("/workspaces/acme/health/")
    assert response.status_code == 200
    html = section(response.content.decode())
    assert "only moves to a tree that passed" in html and "invariant 21" in html
    row = re.search(r'<tr data-project="core">(.*?)</tr>', html, re.S).group(1)
    assert re.search(r'class="num depth"><span class="nowrap">2</span>', row)
    assert "(1 under test)" in row
    assert 'href="/workspaces/acme/agents/tester-1/"' in row and "tester gone" not in row
    assert re.search(r'class="num landed">1<', row)
    assert "0 · 1 · 1" in text(row)  # conflict · check failed · stale fence
    today = datetime.now(UTC).date().isoformat()
    day = re.search(rf'<tr data-day="{today}" data-project="core">(.*?)</tr>', html, re.S).group(1)
    counts = {
        kind: int(re.search(rf'class="num {kind}">(\d+)<', day).group(1))
        for kind in ("landed", "conflict", "check_failed", "stale_fence")
    }
    assert counts == {"landed": 1, "conflict": 0, "check_failed": 1, "stale_fence": 1}
    assert "wait-p50" in day and "—" not in text(day)
    queues = response.context["landings"]
    assert [queue.project.key for queue in queues.projects] == ["core"] and queues.depth == 2
    assert moves(html) == (
        "core: Default branch moved once in this window (1 entry landed), to a tree that "
        "passed the check (red: 0).",
        "1",
        "0",
    )


def moves(html: str, project: str = "core") -> tuple[str, str, str]:
    """A project's line on the default branch's moves: its words, moved, red."""
    line = re.search(rf'<li data-project="{project}"([^>]*)>(.*?)</li>', html, re.S)
    assert line, html
    attributes = dict(re.findall(r'data-(moved|red)="(\d+)"', line.group(1)))
    return text(line.group(2)), attributes["moved"], attributes["red"]


def test_health_says_how_often_the_queue_moved_the_branch_and_that_none_was_red(
    alice, workspace, queue, make_session
):
    client = logged_in(alice)
    tester = make_session("tester-1")
    queue("Add the login page", ["src/login.py"], "coder-1")
    html = section(client.get("/workspaces/acme/health/").content.decode())
    words, moved, red = moves(html)  # queued, nothing landed yet
    assert words == "core: Default branch not moved by the queue in this window (red: 0)."
    assert (moved, red) == ("0", "0")

    queue("Cache the board", ["src/board.py"], "coder-2")
    batch = landings.take_batch(workspace=workspace, project_key="core", session_id=tester.pk)
    for n, entry in enumerate(batch.entries):  # two entries, one move of the branch
        landings.land(
            workspace=workspace, landing_id=entry.pk, session_id=tester.pk, fence=batch.fence,
            commit=f"{n}" * 40,
        )  # fmt: skip
    html = section(client.get("/workspaces/acme/health/").content.decode())
    assert moves(html) == (
        "core: Default branch moved once in this window (2 entries landed), to a tree that "
        "passed the check (red: 0).",
        "1",
        "0",
    )

    red, _ = queue("Rename the helper", ["src/helper.py"], "coder-3")
    green, _ = queue("Speed up the heatmap", ["src/heatmap.py"], "coder-4")
    batch = landings.take_batch(workspace=workspace, project_key="core", session_id=tester.pk)
    landings.reject(
        workspace=workspace, landing_id=red.pk, session_id=tester.pk, fence=batch.fence,
        reason="check_failed", detail=CHECK_OUTPUT,
    )  # fmt: skip
    landings.return_batch(workspace=workspace, session_id=tester.pk, fence=batch.fence)
    batch = landings.take_batch(workspace=workspace, project_key="core", session_id=tester.pk)
    assert [entry.pk for entry in batch.entries] == [green.pk]
    landings.land(
        workspace=workspace, landing_id=green.pk, session_id=tester.pk, fence=batch.fence,
        commit=LANDED,
    )  # fmt: skip
    html = section(client.get("/workspaces/acme/health/").content.decode())
    assert moves(html) == (
        "core: Default branch moved 2 times in this window (3 entries landed), each to a tree "
        "that passed the check (red: 0).",
        "2",
        "0",
    )
    assert 'class="tag bad"' not in html.split('id="landing-moves"')[1].split("</ul>")[0]

    # A landed entry without the commit its tester reported is not proved green: counted.
    Landing.objects.filter(pk=green.pk).update(landed_commit="")
    html = section(client.get("/workspaces/acme/health/").content.decode())
    words, moved, red_count = moves(html)
    assert (moved, red_count) == ("2", "1")
    assert words == (
        "core: Default branch moved 2 times in this window (3 entries landed); 1 of them to a "
        "tree that no reported check proves green (red: 1)."
    )


def test_a_dead_tester_is_said_and_the_batch_is_the_next_take_s(alice, workspace, lot):
    expire(lot["tester"])
    html = section(logged_in(alice).get("/workspaces/acme/health/").content.decode())
    assert "tester gone" in html


def test_health_says_so_when_nothing_is_queued(alice, workspace, other_workspace):
    html = section(logged_in(alice).get("/workspaces/acme/health/").content.decode())
    assert "No branch is queued to land" in html


def test_the_section_costs_the_same_statements_for_few_and_many_entries(
    alice, workspace, queue, make_session
):
    client = logged_in(alice)
    tester = make_session("tester-1")

    def statements() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/workspaces/acme/health/").status_code == 200
        return len(captured)

    def add(first: int, count: int) -> None:
        for n in range(first, first + count):
            queue(f"issue {n}", [f"src/{n}.py"], f"coder-{n}")
        landings.take_batch(workspace=workspace, project_key="core", session_id=tester.pk)

    add(0, 2)
    few = statements()
    add(2, 10)
    assert statements() == few


# --- the arithmetic ------------------------------------------------------------------------------


def test_percentiles_are_nearest_rank_and_waits_are_words():
    assert percentile([], 0.5) is None
    assert percentile([5.0], 0.95) == 5.0
    values = [float(n) for n in range(1, 21)]  # 1..20
    assert percentile(values, 0.5) == 10.0 and percentile(values, 0.95) == 19.0
    assert percentile(list(reversed(values)), 0.5) == 10.0
    assert [wait_words(s) for s in (None, 4.4, 59, 60, 3599, 3600, 3 * 3600 + 300, 2 * 86400)] == [
        "—",
        "4 s",
        "59 s",
        "1 min",
        "59 min",
        "1 h 00",
        "3 h 05",
        "2 d 00 h",
    ]
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th",
    ]  # fmt: skip
    assert detail_tail("a\nb\nc\n", lines=2) == "b\nc"


def test_waits_are_per_day_of_finishing(workspace, queue, make_session):
    """An entry counts on the UTC day it finished, its wait from queued to finished."""
    from heatmap.landings import landings_now

    tester = make_session("tester-1")
    first, _ = queue("one", ["src/a.py"], "coder-1")
    second, _ = queue("two", ["src/b.py"], "coder-2")
    batch = landings.take_batch(workspace=workspace, project_key="core", session_id=tester.pk)
    for entry in batch.entries:
        landings.land(
            workspace=workspace, landing_id=entry.pk, session_id=tester.pk, fence=batch.fence,
            commit=LANDED,
        )  # fmt: skip
    monday = datetime(2026, 11, 2, 23, 0, tzinfo=UTC)
    Landing.objects.filter(pk=first.pk).update(
        queued_at=monday - timedelta(minutes=30), finished_at=monday
    )
    Landing.objects.filter(pk=second.pk).update(
        queued_at=monday - timedelta(hours=2), finished_at=monday + timedelta(hours=2)
    )
    shown = landings_now(workspace, monday - timedelta(days=1), monday + timedelta(days=1))
    assert [(day.day.isoformat(), day.finished.landed) for day in shown.days] == [
        ("2026-11-03", 1),
        ("2026-11-02", 1),
    ]
    assert [day.finished.p50 for day in shown.days] == ["4 h 00", "30 min"]
    assert shown.projects[0].finished.p95 == "4 h 00" and shown.depth == 0
