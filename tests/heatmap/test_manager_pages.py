"""The managers' pages as a member reads and acts on them: review from the issue
page (accept, send back), cards that stay short, marks any font renders, "just now",
and every name a link."""

import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from coordination.models import AgentSession, Event, EventType, Issue, Message
from coordination.services import file_claims, graph
from heatmap.templatetags.story import ago
from tests.conftest import password_of

pytestmark = pytest.mark.django_db
S = Issue.Status
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def member(client, alice):
    client.login(username=alice.username, password=password_of(alice.username))
    return client


def page_of(workspace, issue) -> str:
    return f"/workspaces/{workspace.slug}/issues/{issue.pk}/"


# --- review ---------------------------------------------------------------------------


def test_a_member_sees_accept_and_send_back_on_an_issue_in_review(member, workspace, make_issue):
    in_review = make_issue(status=S.IN_REVIEW)
    todo = make_issue(status=S.TODO)

    shown = member.get(page_of(workspace, in_review)).content.decode()
    other = member.get(page_of(workspace, todo)).content.decode()

    assert 'id="accept-form"' in shown and 'id="send-back-form"' in shown
    assert "csrfmiddlewaretoken" in shown
    assert 'id="accept-form"' not in other


def test_a_member_accepts_work_in_review_and_the_event_names_her(member, workspace, make_issue):
    issue = make_issue(status=S.IN_REVIEW)

    answer = member.post(page_of(workspace, issue), {"decision": "accept"})

    assert answer.status_code == 302 and answer["Location"] == page_of(workspace, issue)
    issue.refresh_from_db()
    assert issue.status == S.DONE
    event = Event.objects.filter(issue=issue, type=EventType.ISSUE_TRANSITIONED).get()
    assert event.data == {"from": "in_review", "to": "done", "operator": "alice"}
    assert event.agent_id is None and event.session_id is None


def test_sending_back_returns_the_issue_to_the_queue_with_the_note(member, workspace, make_issue):
    issue = make_issue(status=S.IN_REVIEW)

    answer = member.post(
        page_of(workspace, issue), {"decision": "send_back", "note": "The test is flaky."}
    )

    assert answer.status_code == 302
    issue.refresh_from_db()
    assert issue.status == S.TODO  # in_review → in_progress → todo, as the workflow allows
    moves = Event.objects.filter(issue=issue, type=EventType.ISSUE_TRANSITIONED).order_by("id")
    assert [(e.data["to"], e.data["operator"]) for e in moves] == [
        ("in_progress", "alice"),
        ("todo", "alice"),
    ]
    [message] = Message.objects.filter(scope=f"issue:{issue.pk}")
    assert message.body == "Sent back by operator alice: The test is flaky."
    page = member.get(page_of(workspace, issue)).content.decode()
    assert "The test is flaky." in page


def test_sending_back_needs_a_note(member, workspace, make_issue):
    issue = make_issue(status=S.IN_REVIEW)

    answer = member.post(page_of(workspace, issue), {"decision": "send_back", "note": "  "})

    assert answer.status_code == 400
    assert "Say what to change" in answer.content.decode()
    issue.refresh_from_db()
    assert issue.status == S.IN_REVIEW and not Message.objects.exists()


@pytest.mark.parametrize("decision", ["accept", "send_back"])
def test_a_wrong_state_shows_the_refusal_on_the_page(member, workspace, make_issue, decision):
    issue = make_issue(status=S.TODO)  # e.g. someone else sent it back meanwhile

    answer = member.post(page_of(workspace, issue), {"decision": decision, "note": "again"})

    assert answer.status_code == 409
    text = answer.content.decode()
    assert 'id="review-errors"' in text
    assert "Cannot move an issue from todo to done." in text or "it is todo" in text
    issue.refresh_from_db()
    assert issue.status == S.TODO
    assert not Event.objects.filter(issue=issue, type=EventType.ISSUE_TRANSITIONED).exists()
    assert not Message.objects.exists()


def test_a_get_changes_nothing_and_a_stranger_gets_404(client, member, charlie, workspace, issue):
    Issue.objects.filter(pk=issue.pk).update(status=S.IN_REVIEW)

    assert member.get(page_of(workspace, issue), {"decision": "accept"}).status_code == 200
    stranger = Client()
    stranger.force_login(charlie)
    assert stranger.post(page_of(workspace, issue), {"decision": "accept"}).status_code == 404
    issue.refresh_from_db()
    assert issue.status == S.IN_REVIEW


def test_a_review_without_the_csrf_token_is_refused(alice, workspace, issue):
    Issue.objects.filter(pk=issue.pk).update(status=S.IN_REVIEW)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)

    answer = strict.post(page_of(workspace, issue), {"decision": "accept"})

    assert answer.status_code == 403
    issue.refresh_from_db()
    assert issue.status == S.IN_REVIEW


# --- the board's cards ----------------------------------------------------------------


def test_a_card_lists_three_held_paths_breakable_at_each_slash_and_counts_the_rest(
    member, workspace, make_issue, make_session
):
    wanting = make_issue(title="Wants many files", status=S.TODO)
    paths = [f"src/web/components/deeply/nested/Widget{n}.tsx" for n in range(5)]
    graph.set_expected_paths(issue=wanting, paths=paths)
    holder = make_issue(title="Holds them", status=S.IN_PROGRESS)
    file_claims.claim_files(
        workspace=workspace,
        issue_id=holder.pk,
        paths=paths,
        session_id=make_session("atlas").pk,
    )

    text = member.get(f"/workspaces/{workspace.slug}/issues/").content.decode()

    card = text[text.index(f'data-issue="{wanting.pk}"') :]
    card = card[: card.index("</article>")]
    assert card.count("<code>") == 3
    assert "<code>src/<wbr>web/<wbr>components/<wbr>deeply/<wbr>nested/<wbr>Widget0.tsx</code>" in (
        card
    )
    assert f'<a class="more-paths" href="{page_of(workspace, wanting)}">+2 more</a>' in card


# --- marks, labels, time --------------------------------------------------------------

# The non-ASCII characters the pages may use: each in DejaVu Sans, which Debian's
# chromium has; an emoji-only mark (⏸ U+23F8) renders there as an empty box.
TEXT_FONT_MARKS = set("·—–…“”→←✕×●▸▾")
PAGE_SOURCES = [
    *sorted((ROOT / "templates").rglob("*.html")),
    *sorted((ROOT / "heatmap" / "static" / "heatmap").glob("*")),
    ROOT / "heatmap" / "timeline.py",
    ROOT / "heatmap" / "story.py",
]


def test_the_pages_use_only_marks_a_text_font_has():
    used = {
        (path.name, char)
        for path in PAGE_SOURCES
        for char in path.read_text(encoding="utf-8")
        if ord(char) > 127
    }
    assert {(name, char) for name, char in used if char not in TEXT_FONT_MARKS} == set()


def test_the_allowed_marks_are_in_an_installed_font():
    try:
        found = {
            char
            for char in TEXT_FONT_MARKS
            if subprocess.run(
                ["fc-list", f":charset={ord(char):x}", "family"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        }
    except FileNotFoundError:
        pytest.skip("needs fontconfig's fc-list")
    assert found == TEXT_FONT_MARKS


def test_a_stalled_holder_is_marked_with_an_svg_not_an_emoji(
    member, workspace, make_issue, make_session, settings
):
    from coordination.services import leases

    settings.PROJEKTOR_STALL_AFTER_SECONDS = 60
    issue = make_issue(title="Stuck", status=S.TODO)
    session = make_session("coder-1")
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    AgentSession.objects.filter(pk=session.pk).update(
        last_progress_at=timezone.now() - timedelta(minutes=5)
    )

    text = member.get(f"/workspaces/{workspace.slug}/issues/").content.decode()

    assert "(stalled)" in text and '<svg class="mark"' in text and "⏸" not in text


def test_a_folded_column_keeps_the_space_between_its_mark_and_its_label(member, workspace):
    text = member.get(f"/workspaces/{workspace.slug}/issues/").content.decode()

    # One inline span (the flex h2 would swallow a space between its items), the
    # space unbreakable: a narrow column does not put the mark on a line of its own.
    assert '<span class="open">▾</span></span>&nbsp;Cancelled</span>' in text


def test_a_heartbeat_under_a_minute_ago_is_just_now():
    now = timezone.now()
    assert ago(now - timedelta(seconds=5)) == "just now"
    assert ago(now - timedelta(minutes=3, seconds=2)) == "3\xa0minutes ago"


def test_the_health_page_says_just_now(member, workspace, make_session):
    make_session("atlas")

    text = member.get(f"/workspaces/{workspace.slug}/health/").content.decode()

    assert "just now" in text and "0\xa0minutes ago" not in text


# --- every name a link ----------------------------------------------------------------


def test_the_workspace_name_links_to_its_board(member, workspace):
    text = member.get("/workspaces/").content.decode()

    assert f'<a href="/workspaces/{workspace.slug}/issues/"><strong>{workspace.name}</strong>' in (
        text
    )


def test_the_agents_breadcrumb_links_to_the_live_agents(member, workspace, make_session):
    make_session("atlas")

    text = member.get(f"/workspaces/{workspace.slug}/agents/atlas/").content.decode()

    assert f'<a href="/workspaces/{workspace.slug}/health/#live-agents"' in text
    health = member.get(f"/workspaces/{workspace.slug}/health/").content.decode()
    assert 'id="live-agents"' in health


def test_the_admin_dashboard_links_each_issue(operator, workspace, issue):
    from coordination.models import Run, Worktree

    worktree = Worktree.objects.create(workspace=workspace, slug="main", path="/tmp/main")
    Run.objects.create(
        workspace=workspace,
        issue=issue,
        worktree=worktree,
        status="skipped",
        error="worktree_unresolved",
        error_detail="no worktree",
    )

    text = operator.get("/admin/").content.decode()

    assert f'<a href="/admin/coordination/issue/{issue.pk}/change/">#{issue.pk} ' in text
