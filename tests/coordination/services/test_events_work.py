"""The event log (invariant 12 (one event per change)) of start_work and finish_work: all or
nothing, and so are their events; every event a session causes names the session and its agent.

Events are compared as the API shows them (``EventSerializer``, without id and time),
so these tests check the table of docs/api.md, not the columns."""

import pytest

from coordination.errors import FileConflict, StaleFence, WipLimitReached
from coordination.models import AgentSession, EventType
from coordination.services import file_claims, work, workflow
from tests.coordination.conftest import claim_lease
from tests.coordination.services.events_helpers import REPORT, cursor, expected, since, types_since

pytestmark = pytest.mark.django_db


# --- start_work and finish_work: all or nothing, and so are their events --------------


def test_start_and_finish_work_announce_every_step(workspace, make_issue):
    issue = make_issue(status="todo")
    mark = cursor()
    started = work.start_work(
        workspace=workspace, agent_name="coder-1", issue_id=issue.pk, paths=["w.py"]
    )
    session = started.session
    assert types_since(mark) == [
        EventType.SESSION_REGISTERED,
        EventType.LEASE_GRANTED,
        EventType.CLAIMS_GRANTED,
        EventType.ISSUE_TRANSITIONED,
        EventType.MESSAGE_POSTED,
    ]
    mark = cursor()
    work.finish_work(workspace=workspace, session_id=session.pk, issue_id=issue.pk, report=REPORT)

    assert since(mark, EventType.ISSUE_TRANSITIONED, EventType.LEASE_RELEASED) == [
        expected(
            EventType.ISSUE_TRANSITIONED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"from": "in_progress", "to": "in_review"},
        ),
        expected(
            EventType.LEASE_RELEASED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"lease": started.lease.pk, "fence": 1, "reason": "released"},
        ),
    ]
    assert types_since(mark) == [
        EventType.ISSUE_TRANSITIONED,
        EventType.MESSAGE_POSTED,  # the completion report
        EventType.CLAIMS_RELEASED,
        EventType.LEASE_RELEASED,
        EventType.SESSION_ENDED,
    ]


def test_every_event_of_start_and_finish_work_names_the_session_and_its_agent(
    workspace, make_issue
):
    """Whatever a session causes is announced as its own: the transitions of
    start_work and finish_work and the completion report included."""
    issue = make_issue(status="todo")
    mark = cursor()
    started = work.start_work(
        workspace=workspace, agent_name="coder-1", issue_id=issue.pk, paths=["w.py"]
    )
    work.finish_work(
        workspace=workspace, session_id=started.session.pk, issue_id=issue.pk, report=REPORT
    )

    announced = since(mark)
    assert len(announced) == 10
    assert {(event["session"], event["agent"]) for event in announced} == {
        (started.session.pk, "coder-1")
    }
    moves = since(mark, EventType.ISSUE_TRANSITIONED)
    assert [(move["data"]["to"], move["agent"]) for move in moves] == [
        ("in_progress", "coder-1"),
        ("in_review", "coder-1"),
    ]


def test_a_transition_by_an_agent_key_names_its_agent(workspace, issue, agent):
    mark = cursor()
    workflow.transition_issue(
        workspace=workspace, issue_id=issue.pk, to="todo", by_human=False, author=agent
    )
    assert since(mark) == [
        expected(
            EventType.ISSUE_TRANSITIONED,
            project="core",
            issue=issue.pk,
            agent=agent.name,
            data={"from": "backlog", "to": "todo"},
        )
    ]


def test_start_work_refused_on_a_file_conflict_announces_only_the_refusal(
    workspace, make_issue, make_session
):
    holder = make_session("holder")
    held, wanted = make_issue(title="Held"), make_issue(title="Wanted", status="todo")
    file_claims.claim_files(
        workspace=workspace, issue_id=held.pk, paths=["hot.py"], session_id=holder.pk
    )
    sessions_before = AgentSession.objects.count()
    mark = cursor()
    with pytest.raises(FileConflict) as refusal:
        work.start_work(
            workspace=workspace,
            agent_name="late",
            issue_id=wanted.pk,
            paths=["cold.py", "hot.py"],
        )

    # The session, the lease, the transition and the post were rolled back: so were
    # their events. The refusal's own event names no session (none came to be).
    assert since(mark) == [
        expected(
            EventType.CLAIMS_REFUSED,
            project="core",
            issue=wanted.pk,
            agent="late",
            data={
                "paths": ["cold.py", "hot.py"],
                "conflicts": refusal.value.extra["conflicts"],
                "conflicts_total": refusal.value.extra["conflicts_total"],
            },
        )
    ]
    assert AgentSession.objects.count() == sessions_before


def test_start_work_refused_by_the_wip_cap_announces_only_the_denial(
    workspace, make_issue, make_session, project
):
    project.agent_wip_limit = 1
    project.save()
    claim_lease(workspace, make_issue(title="Taken"), make_session("holder"))
    wanted = make_issue(title="Wanted", status="todo")
    mark = cursor()
    with pytest.raises(WipLimitReached):
        work.start_work(workspace=workspace, agent_name="late", issue_id=wanted.pk)

    assert since(mark) == [
        expected(
            EventType.WIP_DENIED, project="core", issue=wanted.pk, agent="late", data={"limit": 1}
        )
    ]


def test_finish_work_with_a_lost_lease_announces_nothing(workspace, issue, lost_lease):
    old, first, _new, _second = lost_lease
    mark = cursor()
    with pytest.raises(StaleFence):
        work.finish_work(
            workspace=workspace,
            session_id=old.pk,
            issue_id=issue.pk,
            fence=first.fence,
            report=REPORT,
        )
    assert since(mark) == []
