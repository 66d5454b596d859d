"""The event log (invariant 12 (one event per change)) of the operator's admin actions: a forced
release of a lease, of claims or of a worktree lock names the operator; a session ended and an
issue moved are announced as the services' are.

Events are compared as the API shows them (``EventSerializer``, without id and time),
so these tests check the table of docs/api.md, not the columns."""

import pytest

from coordination.models import (
    AgentSession,
    EventType,
    FileClaim,
    Issue,
    IssueLease,
    Run,
    WorktreeLock,
)
from coordination.services import file_claims, operators, runs
from tests.coordination.conftest import claim_lease
from tests.coordination.services.events_helpers import cursor, expected, since, types_since

pytestmark = pytest.mark.django_db


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
