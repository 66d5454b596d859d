"""The event log (invariant 12): every change of coordination state writes its event,
with the fields of docs/api.md "Events", in the change's transaction; a refused or
rolled-back attempt announces no success.

Events are compared as the API shows them (``EventSerializer``, without id and time),
so these tests check the table of docs/api.md, not the columns."""

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import Max
from django.test.utils import CaptureQueriesContext

from coordination.api.serializers.events import EventSerializer
from coordination.errors import (
    FileConflict,
    InvalidTransition,
    LeaseHeld,
    StaleFence,
    WipLimitReached,
    WorktreeBusy,
    WorktreeUnresolved,
)
from coordination.models import (
    AgentSession,
    ApiKey,
    Event,
    EventType,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    Run,
    Workspace,
    WorktreeLock,
)
from coordination.services import (
    agents,
    events,
    file_claims,
    leases,
    messages,
    operators,
    projects,
    runs,
    work,
    workflow,
)
from coordination.services.locking import ADVISORY_LOCK_KEYS
from tests.conftest import expire
from tests.coordination.conftest import claim_lease
from tests.coordination.mcp.conftest import call, connect, run

pytestmark = pytest.mark.django_db

REPORT = {"summary": "Done.", "verification": "Tests pass."}


def cursor() -> int:
    """The newest event id so far: the test's mark before the change it checks."""
    return Event.objects.aggregate(newest=Max("id"))["newest"] or 0


def shown(event: Event) -> dict[str, Any]:
    body = dict(EventSerializer(event).data)
    del body["id"], body["occurred_at"]
    return body


def since(mark: int, *types: str) -> list[dict[str, Any]]:
    """The events after ``mark`` as the API shows them, in id order (only ``types``)."""
    rows = Event.objects.filter(id__gt=mark).order_by("id")
    if types:
        rows = rows.filter(type__in=types)
    return [shown(event) for event in rows]


def types_since(mark: int) -> list[str]:
    return list(Event.objects.filter(id__gt=mark).order_by("id").values_list("type", flat=True))


def expected(
    type: str,
    *,
    project: str | None = None,
    issue: int | None = None,
    session: AgentSession | None = None,
    agent: str | None = None,
    data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "type": type,
        "project": project,
        "issue": issue,
        "session": session.pk if session is not None else None,
        "agent": agent if agent is not None else (session.agent.name if session else None),
        "data": data or {},
    }


def by(session: AgentSession) -> dict[str, Any]:
    return {"session": session.pk, "agent": session.agent.name}


def lease_of(issue: Issue, session: AgentSession) -> IssueLease:
    return IssueLease.objects.filter(issue=issue, session=session).latest("id")


# --- sessions -------------------------------------------------------------------------


def test_registering_and_ending_a_session_are_announced(workspace):
    mark = cursor()
    session = agents.register_session(workspace=workspace, agent_name="coder-1")
    agents.end_session(workspace=workspace, session_id=session.pk)
    agents.end_session(workspace=workspace, session_id=session.pk)  # twice: one event

    assert since(mark) == [
        expected(EventType.SESSION_REGISTERED, session=session),
        expected(EventType.SESSION_ENDED, session=session),
    ]


def test_a_heartbeat_writes_no_event(workspace, make_session):
    session = make_session()
    mark = cursor()
    agents.heartbeat_session(workspace=workspace, session_id=session.pk)
    assert since(mark) == []


# --- leases ---------------------------------------------------------------------------


def test_a_lease_grant_names_the_lease_and_its_fence(workspace, issue, make_session):
    session = make_session()
    mark = cursor()
    lease = claim_lease(workspace, issue, session)
    claim_lease(workspace, issue, session)  # idempotent: no second grant

    assert since(mark) == [
        expected(
            EventType.LEASE_GRANTED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"lease": lease.pk, "fence": 1},
        )
    ]


def test_a_release_by_the_holder_is_reason_released(workspace, issue, make_session):
    session = make_session()
    lease = claim_lease(workspace, issue, session)
    mark = cursor()
    leases.release_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)

    assert since(mark) == [
        expected(
            EventType.LEASE_RELEASED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"lease": lease.pk, "fence": 1, "reason": "released"},
        )
    ]


def test_a_refused_release_writes_nothing(workspace, issue, make_session):
    session = make_session()
    claim_lease(workspace, issue, session)
    mark = cursor()
    with pytest.raises(StaleFence):
        leases.release_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk, fence=7)
    assert since(mark) == []


def test_ending_a_session_releases_what_it_held_agent_ended(
    workspace, make_issue, make_session, roomy
):
    session = make_session()
    first, second = make_issue(title="First"), make_issue(title="Second")
    lease_one = claim_lease(workspace, first, session)
    lease_two = claim_lease(workspace, second, session)
    file_claims.claim_files(
        workspace=workspace, issue_id=first.pk, paths=["a.py", "b.py"], session_id=session.pk
    )
    file_claims.claim_files(
        workspace=workspace, issue_id=second.pk, paths=["c.py"], session_id=session.pk
    )
    mark = cursor()
    agents.end_session(workspace=workspace, session_id=session.pk)

    ended = {"reason": "agent_ended"}
    assert since(mark) == [
        expected(
            EventType.LEASE_RELEASED,
            project="core",
            issue=first.pk,
            session=session,
            data={"lease": lease_one.pk, "fence": 1, **ended},
        ),
        expected(
            EventType.LEASE_RELEASED,
            project="core",
            issue=second.pk,
            session=session,
            data={"lease": lease_two.pk, "fence": 1, **ended},
        ),
        # One claims.released per holder (issue and session) and reason.
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=first.pk,
            session=session,
            data={"paths": ["a.py", "b.py"], **ended},
        ),
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=second.pk,
            session=session,
            data={"paths": ["c.py"], **ended},
        ),
        expected(EventType.SESSION_ENDED, session=session),
    ]


def test_a_reclaimed_lease_is_announced_for_its_old_holder_naming_the_taker(
    workspace, issue, make_session, roomy
):
    old, new = make_session("old"), make_session("new")
    lost = claim_lease(workspace, issue, old)
    expire(old)
    mark = cursor()
    taken = claim_lease(workspace, issue, new)

    assert since(mark) == [
        expected(
            EventType.LEASE_RELEASED,
            project="core",
            issue=issue.pk,
            session=old,
            data={"lease": lost.pk, "fence": 1, "reason": "expired", "by": by(new)},
        ),
        expected(
            EventType.LEASE_GRANTED,
            project="core",
            issue=issue.pk,
            session=new,
            data={"lease": taken.pk, "fence": 2},
        ),
    ]


def test_a_lease_held_by_a_live_session_is_refused_silently(workspace, issue, make_session):
    holder, other = make_session("holder"), make_session("other")
    claim_lease(workspace, issue, holder)
    mark = cursor()
    with pytest.raises(LeaseHeld):
        claim_lease(workspace, issue, other)
    assert since(mark) == []


def test_closing_an_issue_releases_its_lease_and_claims_issue_closed(
    workspace, issue, make_session
):
    session = make_session()
    lease = claim_lease(workspace, issue, session)
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["x.py"], session_id=session.pk
    )
    mark = cursor()
    workflow.transition_issue(workspace=workspace, issue_id=issue.pk, to="cancelled", by_human=True)

    closed = {"reason": "issue_closed"}
    assert since(mark) == [
        expected(
            EventType.ISSUE_TRANSITIONED,
            project="core",
            issue=issue.pk,
            data={"from": "backlog", "to": "cancelled"},
        ),
        expected(
            EventType.LEASE_RELEASED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"lease": lease.pk, "fence": 1, **closed},
        ),
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"paths": ["x.py"], **closed},
        ),
    ]


def test_the_wip_cap_refusal_is_announced_though_the_claim_failed(
    workspace, make_issue, make_session, project
):
    project.agent_wip_limit = 1
    project.save()
    holder, refused = make_session("holder"), make_session("refused")
    claim_lease(workspace, make_issue(title="Taken"), holder)
    wanted = make_issue(title="Wanted")
    mark = cursor()
    with pytest.raises(WipLimitReached):
        claim_lease(workspace, wanted, refused)

    assert since(mark) == [
        expected(
            EventType.WIP_DENIED,
            project="core",
            issue=wanted.pk,
            session=refused,
            data={"limit": 1},
        )
    ]


# --- file claims ----------------------------------------------------------------------


def test_a_claim_grant_names_only_the_paths_it_took(workspace, issue, make_session):
    session = make_session()
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["kept.py"], session_id=session.pk
    )
    mark = cursor()
    file_claims.claim_files(
        workspace=workspace,
        issue_id=issue.pk,
        paths=["new/b.py", "kept.py", "new/a.py"],
        session_id=session.pk,
    )
    file_claims.claim_files(  # everything held already: no grant
        workspace=workspace, issue_id=issue.pk, paths=["kept.py"], session_id=session.pk
    )

    assert since(mark) == [
        expected(
            EventType.CLAIMS_GRANTED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"paths": ["new/a.py", "new/b.py"]},
        )
    ]


def test_releasing_files_is_reason_released(workspace, issue, make_session):
    session = make_session()
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["a.py", "b.py"], session_id=session.pk
    )
    mark = cursor()
    file_claims.release_files(workspace=workspace, issue_id=issue.pk, paths=["b.py", "zz.py"])
    file_claims.release_files(workspace=workspace, issue_id=issue.pk, paths=["zz.py"])  # none

    assert since(mark) == [
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"paths": ["b.py"], "reason": "released"},
        )
    ]


def test_a_refused_claim_names_the_request_and_the_conflicts_and_grants_nothing(
    workspace, make_issue, make_session
):
    holder, refused = make_session("holder"), make_session("refused")
    held, wanted = make_issue(title="Held"), make_issue(title="Wanted")
    file_claims.claim_files(
        workspace=workspace, issue_id=held.pk, paths=["shared.py"], session_id=holder.pk
    )
    mark = cursor()
    with pytest.raises(FileConflict) as refusal:
        file_claims.claim_files(
            workspace=workspace,
            issue_id=wanted.pk,
            paths=["free.py", "shared.py"],
            session_id=refused.pk,
        )

    conflicts = refusal.value.extra["conflicts"]
    assert conflicts == [
        {
            "path": "shared.py",
            "held_path": "shared.py",
            "issue": held.pk,
            "session": holder.pk,
            "agent": "holder",
        }
    ]
    assert since(mark) == [
        expected(
            EventType.CLAIMS_REFUSED,
            project="core",
            issue=wanted.pk,
            session=refused,
            data={"paths": ["free.py", "shared.py"], "conflicts": conflicts, "conflicts_total": 1},
        )
    ]
    assert not FileClaim.objects.filter(path="free.py").exists()


def test_a_dead_holders_claims_are_announced_expired_naming_the_taker(
    workspace, make_issue, make_session
):
    old, new = make_session("old"), make_session("new")
    theirs, ours = make_issue(title="Theirs"), make_issue(title="Ours")
    file_claims.claim_files(
        workspace=workspace, issue_id=theirs.pk, paths=["a.py", "b.py"], session_id=old.pk
    )
    expire(old)
    mark = cursor()
    file_claims.claim_files(
        workspace=workspace, issue_id=ours.pk, paths=["b.py", "a.py"], session_id=new.pk
    )

    assert since(mark) == [
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=theirs.pk,
            session=old,
            data={"paths": ["a.py", "b.py"], "reason": "expired", "by": by(new)},
        ),
        expected(
            EventType.CLAIMS_GRANTED,
            project="core",
            issue=ours.pk,
            session=new,
            data={"paths": ["a.py", "b.py"]},
        ),
    ]


def test_a_forced_claim_announces_one_release_per_holder_naming_the_taker(
    workspace, make_issue, make_session
):
    first, second, taker = make_session("first"), make_session("second"), make_session("taker")
    one, two, ours = make_issue(title="One"), make_issue(title="Two"), make_issue(title="Ours")
    file_claims.claim_files(
        workspace=workspace, issue_id=one.pk, paths=["a.py", "c.py"], session_id=first.pk
    )
    file_claims.claim_files(
        workspace=workspace, issue_id=two.pk, paths=["b.py"], session_id=second.pk
    )
    mark = cursor()
    file_claims.claim_files(
        workspace=workspace,
        issue_id=ours.pk,
        paths=["a.py", "b.py", "c.py"],
        session_id=taker.pk,
        force=True,
    )

    overridden = {"reason": "overridden", "by": by(taker)}
    assert since(mark, EventType.CLAIMS_RELEASED, EventType.CLAIMS_GRANTED) == [
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=one.pk,
            session=first,
            data={"paths": ["a.py", "c.py"], **overridden},
        ),
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=two.pk,
            session=second,
            data={"paths": ["b.py"], **overridden},
        ),
        expected(
            EventType.CLAIMS_GRANTED,
            project="core",
            issue=ours.pk,
            session=taker,
            data={"paths": ["a.py", "b.py", "c.py"]},
        ),
    ]
    # The posts that tell the displaced are announced too, each once.
    posted = since(mark, EventType.MESSAGE_POSTED)
    assert sorted(e["data"]["message"] for e in posted) == sorted(
        Message.objects.values_list("id", flat=True)
    )


# --- issues ---------------------------------------------------------------------------


def test_creating_and_moving_an_issue_are_announced(workspace, project):
    mark = cursor()
    issue = projects.create_issue(
        workspace=workspace,
        fields={"project": "core", "title": "New", "description": "Done when new."},
    )
    workflow.transition_issue(workspace=workspace, issue_id=issue.pk, to="todo", by_human=False)
    with pytest.raises(InvalidTransition):
        workflow.transition_issue(workspace=workspace, issue_id=issue.pk, to="done", by_human=True)

    assert since(mark) == [
        expected(EventType.ISSUE_CREATED, project="core", issue=issue.pk),
        expected(
            EventType.ISSUE_TRANSITIONED,
            project="core",
            issue=issue.pk,
            data={"from": "backlog", "to": "todo"},
        ),
    ]


# --- runs -----------------------------------------------------------------------------


def test_a_run_is_announced_dispatched_then_finished(
    workspace, make_issue, make_session, tree, roomy
):
    session = make_session()
    issue = make_issue(worktree=tree)
    mark = cursor()
    run = runs.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=issue.pk)
    runs.finish_run(workspace=workspace, run_id=run.pk, outcome="succeeded")
    free = make_issue(title="No files")
    unlocked = runs.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=free.pk)

    lease = lease_of(issue, session)
    assert since(mark, EventType.RUN_DISPATCHED, EventType.RUN_FINISHED) == [
        expected(
            EventType.RUN_DISPATCHED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"run": run.pk, "lock_mode": "exclusive", "worktree": "main"},
        ),
        expected(
            EventType.RUN_FINISHED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"run": run.pk, "outcome": "succeeded"},
        ),
        expected(
            EventType.RUN_DISPATCHED,
            project="core",
            issue=free.pk,
            session=session,
            data={"run": unlocked.pk, "lock_mode": "none", "worktree": None},
        ),
    ]
    assert since(mark, EventType.LEASE_GRANTED)[0]["data"] == {"lease": lease.pk, "fence": 1}


def test_a_run_on_a_busy_worktree_is_announced_not_started(
    workspace, make_issue, make_session, tree, roomy
):
    holder, waiter = make_session("holder"), make_session("waiter")
    runs.dispatch_run(
        workspace=workspace, session_id=holder.pk, issue_id=make_issue(worktree=tree).pk
    )
    issue = make_issue(worktree=tree)
    mark = cursor()
    with pytest.raises(WorktreeBusy) as busy:
        runs.dispatch_run(workspace=workspace, session_id=waiter.pk, issue_id=issue.pk)

    run = busy.value.extra["run"]
    assert since(mark, EventType.RUN_DISPATCHED, EventType.RUN_NOT_STARTED) == [
        expected(
            EventType.RUN_NOT_STARTED,
            project="core",
            issue=issue.pk,
            session=waiter,
            data={"run": run, "error": "worktree_busy"},
        )
    ]


def test_an_unresolved_run_releases_the_lease_worktree_unresolved(
    workspace, make_issue, make_session, roomy
):
    session = make_session()
    issue = make_issue(requires_filesystem=True)
    mark = cursor()
    with pytest.raises(WorktreeUnresolved) as unresolved:
        runs.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=issue.pk)

    lease = lease_of(issue, session)
    assert types_since(mark) == [
        EventType.LEASE_GRANTED,
        EventType.LEASE_RELEASED,
        EventType.RUN_NOT_STARTED,
    ]
    released, not_started = since(mark)[1:]
    assert released == expected(
        EventType.LEASE_RELEASED,
        project="core",
        issue=issue.pk,
        session=session,
        data={"lease": lease.pk, "fence": 1, "reason": "worktree_unresolved"},
    )
    assert not_started == expected(
        EventType.RUN_NOT_STARTED,
        project="core",
        issue=issue.pk,
        session=session,
        data={"run": unresolved.value.extra["run"], "error": "worktree_unresolved"},
    )


# --- messages -------------------------------------------------------------------------


def test_a_post_names_its_message_and_scope_and_the_scopes_issue_or_project(
    workspace, issue, make_session, project
):
    session = make_session()
    mark = cursor()
    on_issue = messages.post_message(
        workspace=workspace, scope=f"issue:{issue.pk}", body="Hi", session_id=session.pk
    )
    on_project = messages.post_message(workspace=workspace, scope="project:core", body="All")
    to_agent = messages.post_message(workspace=workspace, scope="agent:coder-1", body="You")

    assert since(mark) == [
        expected(
            EventType.MESSAGE_POSTED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"message": on_issue.pk, "scope": f"issue:{issue.pk}"},
        ),
        expected(
            EventType.MESSAGE_POSTED,
            project="core",
            data={"message": on_project.pk, "scope": "project:core"},
        ),
        expected(EventType.MESSAGE_POSTED, data={"message": to_agent.pk, "scope": "agent:coder-1"}),
    ]


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


# --- the buffer: written with the commit, dropped with a rollback ---------------------


def test_a_block_left_by_an_exception_drops_its_events_and_keeps_the_outer_ones(workspace, issue):
    mark = cursor()
    with events.change():
        events.record(workspace.pk, EventType.ISSUE_CREATED, issue_id=issue.pk)
        with pytest.raises(RuntimeError), events.change():
            events.record(workspace.pk, EventType.SESSION_ENDED)
            raise RuntimeError("the inner step failed")
        assert since(mark) == []  # nothing is written before the outermost block ends
    assert types_since(mark) == [EventType.ISSUE_CREATED]

    mark = cursor()
    with pytest.raises(RuntimeError), events.change():
        events.record(workspace.pk, EventType.ISSUE_CREATED, issue_id=issue.pk)
        raise RuntimeError("the whole change failed")
    with events.change():
        events.record(workspace.pk, EventType.ISSUE_CREATED, issue_id=issue.pk)
        transaction.set_rollback(True)
    assert since(mark) == []


def test_record_outside_a_change_is_refused(workspace):
    with pytest.raises(RuntimeError, match="outside events.change"):
        events.record(workspace.pk, EventType.ISSUE_CREATED)


def test_one_change_in_two_workspaces_writes_each_its_own(workspace, other_workspace):
    mark = cursor()
    with events.change():
        events.record(other_workspace.pk, EventType.ISSUE_CREATED)
        events.record(workspace.pk, EventType.SESSION_ENDED)
        events.record(other_workspace.pk, EventType.SESSION_ENDED)
    rows = Event.objects.filter(id__gt=mark).order_by("id")
    assert [(e.workspace_id, e.type) for e in rows if e.workspace_id == other_workspace.pk] == [
        (other_workspace.pk, EventType.ISSUE_CREATED),
        (other_workspace.pk, EventType.SESSION_ENDED),
    ]
    assert [e.type for e in rows if e.workspace_id == workspace.pk] == [EventType.SESSION_ENDED]


@pytest.mark.postgres
def test_the_insert_takes_each_workspaces_writer_lock_in_the_same_statement(
    workspace, other_workspace
):
    """docs/api.md "Events", the writers' half: the shared writer lock is held before
    any id is drawn, to the commit; one statement per workspace takes both."""
    namespace = ADVISORY_LOCK_KEYS["event_log"]
    with transaction.atomic(), CaptureQueriesContext(connection) as sent:
        with events.change():
            events.record(workspace.pk, EventType.ISSUE_CREATED)
            events.record(other_workspace.pk, EventType.ISSUE_CREATED)
        with connection.cursor() as held:
            held.execute(
                "SELECT classid::bigint, objid::bigint, mode FROM pg_locks"
                " WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND granted"
            )
            locks = set(held.fetchall())
    assert locks == {
        (namespace, workspace.pk, "ShareLock"),
        (namespace, other_workspace.pk, "ShareLock"),
    }
    inserts = [q["sql"] for q in sent.captured_queries if "pg_advisory_xact_lock" in q["sql"]]
    assert len(inserts) == 2
    assert all("INSERT INTO" in sql for sql in inserts)


# --- the operator's admin actions -----------------------------------------------------


def test_an_operators_force_release_of_a_lease_names_the_operator(workspace, issue, make_session):
    session = make_session()
    lease = claim_lease(workspace, issue, session)
    mark = cursor()
    operators.force_release_leases(leases=IssueLease.objects.filter(pk=lease.pk), operator="ops")
    operators.force_release_leases(leases=IssueLease.objects.filter(pk=lease.pk), operator="ops")

    operator = {"session": None, "agent": None, "operator": "ops"}
    assert since(mark, EventType.LEASE_RELEASED) == [
        expected(
            EventType.LEASE_RELEASED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"lease": lease.pk, "fence": 1, "reason": "overridden", "by": operator},
        )
    ]
    assert types_since(mark) == [EventType.LEASE_RELEASED, EventType.MESSAGE_POSTED]


def test_an_operators_force_release_of_claims_names_the_operator(
    workspace, make_issue, make_session
):
    one, two = make_session("one"), make_session("two")
    first, second = make_issue(title="First"), make_issue(title="Second")
    file_claims.claim_files(
        workspace=workspace, issue_id=first.pk, paths=["a.py", "b.py"], session_id=one.pk
    )
    file_claims.claim_files(
        workspace=workspace, issue_id=second.pk, paths=["c.py"], session_id=two.pk
    )
    mark = cursor()
    operators.force_release_file_claims(claims=FileClaim.objects.all(), operator="ops")

    operator = {"reason": "overridden", "by": {"session": None, "agent": None, "operator": "ops"}}
    assert since(mark, EventType.CLAIMS_RELEASED) == [
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=first.pk,
            session=one,
            data={"paths": ["a.py", "b.py"], **operator},
        ),
        expected(
            EventType.CLAIMS_RELEASED,
            project="core",
            issue=second.pk,
            session=two,
            data={"paths": ["c.py"], **operator},
        ),
    ]


def test_an_operators_worktree_release_cancels_the_run_and_says_so(
    workspace, make_issue, make_session, tree, roomy
):
    session = make_session()
    issue = make_issue(worktree=tree)
    run = runs.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=issue.pk)
    lock = WorktreeLock.objects.get(run=run)
    mark = cursor()
    operators.force_release_worktree_locks(
        locks=WorktreeLock.objects.filter(pk=lock.pk), operator="ops"
    )
    again = cursor()
    outcome = operators.force_release_worktree_locks(
        locks=WorktreeLock.objects.filter(pk=lock.pk), operator="ops"
    )

    assert since(mark, EventType.RUN_FINISHED) == [
        expected(
            EventType.RUN_FINISHED,
            project="core",
            issue=issue.pk,
            session=session,
            data={"run": run.pk, "outcome": "cancelled"},
        )
    ]
    # A refused force (already released) rolls back and announces nothing.
    assert outcome.refused and since(again) == []
    assert Run.objects.get(pk=run.pk).status == "cancelled"


def test_an_operators_session_end_and_transition_are_announced(workspace, issue, make_session):
    session = make_session()
    mark = cursor()
    operators.end_sessions(sessions=AgentSession.objects.filter(pk=session.pk))
    operators.transition_issues(issues=Issue.objects.filter(pk=issue.pk), to="cancelled")
    assert since(mark) == [
        expected(EventType.SESSION_ENDED, session=session),
        expected(
            EventType.ISSUE_TRANSITIONED,
            project="core",
            issue=issue.pk,
            data={"from": "backlog", "to": "cancelled"},
        ),
    ]


# --- every entry point: the demo's history, MCP ---------------------------------------


def test_the_demo_history_announces_every_change_of_its_logs():
    call_command("seed_demo", "--agents", "6", "--days", "3", stdout=StringIO())
    demo = Workspace.objects.get(slug="demo")

    def announced(type: str, **data: Any) -> int:
        rows = Event.objects.filter(workspace=demo, type=type)
        for key, value in data.items():
            rows = rows.filter(**{f"data__{key}": value})
        return rows.count()

    leases = IssueLease.objects.filter(workspace=demo)
    assert announced(EventType.LEASE_GRANTED) == leases.count() > 0
    assert announced(EventType.LEASE_RELEASED) == leases.filter(released_at__isnull=False).count()
    for reason in ("released", "expired", "agent_ended", "issue_closed"):
        assert announced(EventType.LEASE_RELEASED, reason=reason) == (
            leases.filter(release_reason=reason).count()
        ), reason
    assert announced(EventType.MESSAGE_POSTED) == Message.objects.filter(workspace=demo).count()
    assert announced(EventType.SESSION_REGISTERED) == (
        AgentSession.objects.filter(workspace=demo).count()
    )
    granted = sum(
        len(event.data["paths"])
        for event in Event.objects.filter(workspace=demo, type=EventType.CLAIMS_GRANTED)
    )
    assert granted == FileClaim.objects.filter(workspace=demo).count()
    assert announced(EventType.RUN_DISPATCHED) + announced(EventType.RUN_NOT_STARTED) == (
        Run.objects.filter(workspace=demo).count()
    )


@pytest.mark.django_db(transaction=True)
def test_mcp_tools_announce_their_changes_as_the_api_does(live_server, workspace, make_issue):
    raw = ApiKey.issue(workspace, "mcp")[1]
    issue = make_issue(status="todo")
    mark = cursor()

    async def scenario() -> None:
        async with connect(f"{live_server.url}/mcp", raw) as client:
            started = await call(
                client, "start_work", agent="mcp-coder", issue=issue.pk, paths=["m.py"]
            )
            await call(
                client,
                "post_message",
                scope=f"issue:{issue.pk}",
                body="Halfway.",
                session=started["session"]["id"],
            )
            await call(
                client,
                "finish_work",
                session=started["session"]["id"],
                issue=issue.pk,
                report=REPORT,
            )

    run(scenario)
    assert types_since(mark) == [
        EventType.SESSION_REGISTERED,
        EventType.LEASE_GRANTED,
        EventType.CLAIMS_GRANTED,
        EventType.ISSUE_TRANSITIONED,
        EventType.MESSAGE_POSTED,
        EventType.MESSAGE_POSTED,
        EventType.ISSUE_TRANSITIONED,
        EventType.MESSAGE_POSTED,
        EventType.CLAIMS_RELEASED,
        EventType.LEASE_RELEASED,
        EventType.SESSION_ENDED,
    ]
    assert {e["agent"] for e in since(mark, EventType.LEASE_GRANTED)} == {"mcp-coder"}
