"""The issue page's coordination panels: the claims it holds, the conflicts it took
part in, the messages posted to it; bounded, and at a fixed number of queries."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from coordination.admin import issue_page
from coordination.errors import FileConflict
from coordination.models import ClaimConflict, Issue, Message
from coordination.services import file_claims, messages
from tests.coordination.admin_helpers import url

pytestmark = pytest.mark.django_db


def contested(workspace, mine, theirs, session, *, paths):
    """``theirs`` holds ``paths``; ``mine`` asks for them and is refused."""
    file_claims.claim_files(workspace=workspace, issue_id=theirs.pk, paths=paths)
    with pytest.raises(FileConflict):
        file_claims.claim_files(
            workspace=workspace, issue_id=mine.pk, paths=paths, session_id=session.pk
        )


def test_the_panels_show_this_issues_claims_conflicts_and_messages(
    workspace, make_issue, make_session
):
    mine, theirs, other = make_issue(title="Mine"), make_issue(title="Theirs"), make_issue()
    session = make_session("coder-7")
    file_claims.claim_files(
        workspace=workspace, issue_id=mine.pk, paths=["b.py", "a.py"], session_id=session.pk
    )
    file_claims.release_files(workspace=workspace, issue_id=mine.pk, paths=["b.py"])
    contested(workspace, mine, theirs, session, paths=["held.py"])
    contested(workspace, theirs, mine, session, paths=["a.py"])
    messages.record_message(
        workspace=workspace,
        scope=messages.issue_scope(mine.pk),
        body="Line 1\nLine 2",
        session=None,
    )
    messages.record_message(
        workspace=workspace, scope=messages.issue_scope(other.pk), body="Elsewhere", session=None
    )
    claims, conflicts, posts = issue_page.panels(Issue.objects.get(pk=mine.pk))

    assert [str(row[0]) for row in claims.rows] == ['<span class="nowrap">a.py</span>']
    assert f"coder-7 · session {session.pk}" in str(claims.rows[0][1])
    assert [row[4] for row in conflicts.rows] == ["refused", "refused"]  # both sides
    assert {str(row[1]) for row in conflicts.rows} == {
        '<span class="nowrap">held.py</span>',
        '<span class="nowrap">a.py</span>',
    }
    assert [str(row[2]) for row in posts.rows] == ['<span class="body">Line 1\nLine 2</span>']
    assert [row[1] for row in posts.rows] == ["Projektor"]


def test_the_panels_keep_the_newest_and_link_to_the_rest(operator, workspace, make_issue):
    issue = make_issue()
    for n in range(issue_page.SHOWN + 3):
        messages.record_message(
            workspace=workspace,
            scope=messages.issue_scope(issue.pk),
            body=f"note {n}",
            session=None,
        )
    posts = issue_page.messages_panel(issue)
    assert len(posts.rows) == issue_page.SHOWN
    assert "note 12" in str(posts.rows[0][2])  # newest first
    ((label, address),) = posts.more
    everything = operator.get(address).context["cl"].result_list
    assert len(everything) == issue_page.SHOWN + 3 == Message.objects.count()


def test_the_conflict_links_list_each_side(operator, workspace, make_issue, make_session):
    mine, theirs = make_issue(), make_issue()
    session = make_session()
    contested(workspace, mine, theirs, session, paths=["x.py"])
    refused, held = issue_page.conflicts_panel(mine).more
    assert len(operator.get(refused[1]).context["cl"].result_list) == 1
    assert len(operator.get(held[1]).context["cl"].result_list) == 0
    assert ClaimConflict.objects.get().rejected_issue_id == mine.pk


def test_the_issue_page_costs_the_same_however_long_its_history(
    operator, workspace, make_issue, make_session
):
    mine, theirs = make_issue(), make_issue()
    session = make_session()

    def page_queries():
        assert operator.get(url(Issue, "change", mine.pk)).status_code == 200
        with CaptureQueriesContext(connection) as captured:
            operator.get(url(Issue, "change", mine.pk))
        return len(captured)

    contested(workspace, mine, theirs, session, paths=["c0.py"])
    file_claims.claim_files(
        workspace=workspace, issue_id=mine.pk, paths=["m0.py"], session_id=session.pk
    )
    short = page_queries()
    for n in range(1, 15):
        contested(workspace, mine, theirs, session, paths=[f"c{n}.py"])
        file_claims.claim_files(
            workspace=workspace, issue_id=mine.pk, paths=[f"m{n}.py"], session_id=session.pk
        )
    assert page_queries() == short
