"""The event log (invariant 12 (one event per change)) of issues, runs and messages: an issue
created and moved, a run dispatched, finished or not started, a post and its scope.

Events are compared as the API shows them (``EventSerializer``, without id and time),
so these tests check the table of docs/api.md, not the columns."""

import pytest

from coordination.errors import InvalidTransition, WorktreeBusy, WorktreeUnresolved
from coordination.models import EventType
from coordination.services import messages, projects, runs, workflow
from tests.coordination.services.events_helpers import (
    cursor,
    expected,
    lease_of,
    since,
    types_since,
)

pytestmark = pytest.mark.django_db


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
