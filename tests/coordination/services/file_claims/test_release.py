"""Releasing file claims: some paths, a session's, an issue's, and the release reasons."""

import pytest

from coordination.errors import InvalidInput, NotFound
from coordination.models import FileClaim, ReleaseReason
from coordination.services import agents, events, file_claims, workflow
from tests.conftest import expire
from tests.coordination.conftest import held

pytestmark = pytest.mark.django_db


def test_release_some_paths(claim, workspace, issue, make_session):
    claim(issue, ["a.py", "b.py", "c.py"], make_session())

    released = file_claims.release_files(
        workspace=workspace, issue_id=issue.pk, paths=["./b.py", "a.py", "not-held.py"]
    )

    assert released == ["a.py", "b.py"]
    assert held() == {"c.py": issue.pk}
    assert set(
        FileClaim.objects.filter(path__in=["a.py", "b.py"]).values_list("release_reason", flat=True)
    ) == {ReleaseReason.RELEASED}


def test_release_all_of_an_issue_leaves_other_issues_alone(
    claim, workspace, make_issue, make_session
):
    mine, theirs = make_issue(), make_issue()
    claim(mine, ["a.py", "b.py"], make_session("me"))
    claim(theirs, ["c.py"], make_session("them"))

    released = file_claims.release_files(workspace=workspace, issue_id=mine.pk)

    assert released == ["a.py", "b.py"]
    assert held() == {"c.py": theirs.pk}
    assert file_claims.release_files(workspace=workspace, issue_id=mine.pk) == []


def test_release_with_a_session_releases_only_its_claims(claim, workspace, issue, make_session):
    one, two = make_session("one"), make_session("two")
    claim(issue, ["a.py"], one)
    claim(issue, ["b.py"], two)

    released = file_claims.release_files(workspace=workspace, issue_id=issue.pk, session_id=two.pk)

    assert released == ["b.py"]
    assert held() == {"a.py": issue.pk}


def test_release_refuses_bad_references_and_paths(claim, workspace, issue, make_session):
    claim(issue, ["a.py"], make_session())
    with pytest.raises(NotFound):
        file_claims.release_files(workspace=workspace, issue_id=issue.pk + 1000)
    with pytest.raises(InvalidInput):
        file_claims.release_files(workspace=workspace, issue_id=issue.pk, session_id=99999)
    with pytest.raises(InvalidInput):
        file_claims.release_files(workspace=workspace, issue_id=issue.pk, paths=["/a.py"])
    with pytest.raises(InvalidInput):
        file_claims.release_files(workspace=workspace, issue_id=issue.pk, paths=[])
    assert held() == {"a.py": issue.pk}


def test_ending_a_session_is_agent_ended_and_a_crash_is_expired(
    claim, workspace, make_issue, make_session
):
    first, second, claimer_issue = make_issue(), make_issue(), make_issue()
    clean, crashed, claimer = make_session("clean"), make_session("crashed"), make_session("c")
    claim(first, ["clean.py"], clean)
    claim(second, ["crashed.py"], crashed)

    agents.end_session(workspace=workspace, session_id=clean.pk)
    expire(crashed)
    claim(claimer_issue, ["crashed.py"], claimer)

    assert FileClaim.objects.get(session=clean).release_reason == ReleaseReason.AGENT_ENDED
    assert FileClaim.objects.get(session=crashed).release_reason == ReleaseReason.EXPIRED
    # A crash is never recorded as a clean exit, nor the other way round.
    assert held() == {"crashed.py": claimer_issue.pk}


def test_closing_the_issue_releases_its_claims_issue_closed(
    claim, workspace, make_issue, make_session
):
    closing, staying = make_issue(), make_issue()
    claim(closing, ["a.py", "b.py"], make_session("a"))
    claim(staying, ["c.py"], make_session("b"))

    workflow.transition_issue(
        workspace=workspace, issue_id=closing.pk, to="cancelled", by_human=False
    )

    assert set(
        FileClaim.objects.filter(issue=closing).values_list("release_reason", flat=True)
    ) == {ReleaseReason.ISSUE_CLOSED}
    assert held() == {"c.py": staying.pk}


def test_release_helpers_keep_their_contract(claim, issue, make_session):
    session = make_session()
    claim(issue, ["a.py", "b.py"], session)
    with events.change():  # the helpers run inside a change, which writes their events
        released = file_claims.release_session_claims(
            session=session, reason=ReleaseReason.RELEASED
        )
        assert released == 2
        closed = file_claims.release_issue_claims(issue=issue, reason=ReleaseReason.ISSUE_CLOSED)
        assert closed == 0
    assert set(FileClaim.objects.values_list("release_reason", flat=True)) == {"released"}
