"""Runs: dispatching an issue to a session, and finishing or cancelling the run
(invariant 10 (lock mode per run)).

Dispatch takes the lease, resolves the run's lock and takes it
(``coordination.services.worktrees``), and records the run; a run that cannot start
is recorded too, with why, so the operator sees it.
"""

from __future__ import annotations

from typing import Any, assert_never

from coordination.errors import InvalidInput, RunNotRunning, WorktreeBusy, WorktreeUnresolved
from coordination.liveness import DbNow
from coordination.models import (
    AgentSession,
    EventType,
    Issue,
    ReleaseReason,
    Run,
    Workspace,
    Worktree,
    WorktreeLock,
)
from coordination.selectors import lookups
from coordination.selectors.runs import runs as shown_runs
from coordination.services import events, fences, leases, worktrees
from coordination.services.common import release_unreleased
from coordination.services.worktrees import (
    ExclusiveLock,
    NoLock,
    RunLock,
    WorktreeConfigurationError,
    acquire_worktree_lock,
    describe_holder,
    lock_fields,
    primary_worktree_lock,
    resolve_run_lock,
)


def dispatch_run(
    *, workspace: Workspace, session_id: int, issue_id: int, primary_worktree: bool = False
) -> Run:
    """Dispatch ``issue`` to a live session: lease, resolve, lock, record the run.

    With ``primary_worktree`` the run locks the project's primary worktree whatever
    the issue and the agent name: work on the main checkout, such as integrating the
    issue's branch, one run at a time. A project without one is refused (400) before
    anything changes.

    The lease is taken first if the session lacks it, with ``claim_issue``'s own
    errors; it runs outside this function's transactions because a WIP refusal
    commits its denial row before raising. The two failures are recorded as runs so
    the operator sees the cause, and are raised only after that record commits:

    - unresolved → lease released ``worktree_unresolved``, run ``skipped``, 422;
    - worktree held by a live run → run ``cancelled``, lease kept (the agent
      retries on its next beat), 409 naming the holder.
    """
    issue = lookups.get_issue(workspace, issue_id)
    session = lookups.get_session(workspace, session_id)
    if primary_worktree and issue.project.primary_worktree is None:
        raise InvalidInput(
            f"Project {issue.project.key!r} has no primary worktree: set one "
            '(PATCH /projects/{id}/ "primary_worktree") to dispatch a run on it.',
            field="primary_worktree",
        )
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    agent = session.agent
    try:
        lock: RunLock = (
            primary_worktree_lock(issue=issue)
            if primary_worktree
            else resolve_run_lock(issue=issue, agent=agent)
        )
    except WorktreeConfigurationError as error:
        run = record_unresolved(workspace=workspace, issue=issue, session=session, error=error)
        error.extra["run"] = run.pk
        raise
    busy: WorktreeBusy | None = None
    with events.change():
        run = Run.objects.create(
            workspace=workspace,
            issue=issue,
            session=session,
            agent=agent,
            status=Run.Status.RUNNING,
            **lock_fields(lock),
        )
        match lock:
            case ExclusiveLock(worktree=worktree):
                taken = acquire_worktree_lock(run=run, worktree=worktree)
                if taken is not None:
                    busy = record_busy(run=run, worktree=worktree, holder=taken.holder)
            case NoLock():
                pass
            case _:
                assert_never(lock)
        if busy is None:
            run_event(
                run,
                EventType.RUN_DISPATCHED,
                project_id=issue.project_id,
                data={
                    "lock_mode": run.lock_mode,
                    "worktree": run.worktree.slug if run.worktree is not None else None,
                },
            )
    if busy is not None:
        raise busy
    return shown_runs(workspace).get(pk=run.pk)


def record_unresolved(
    *, workspace: Workspace, issue: Issue, session: AgentSession, error: WorktreeUnresolved
) -> Run:
    """Release the lease and record the skipped run, committed before the 422."""
    with events.change():
        leases.release_leases(
            reason=ReleaseReason.WORKTREE_UNRESOLVED,
            issue_id=issue.pk,
            session_id=session.pk,
        )
        run = Run.objects.create(
            workspace=workspace,
            issue=issue,
            session=session,
            agent=session.agent,
            lock_mode=Run.LockMode.NONE,
            worktree=None,
            status=Run.Status.SKIPPED,
            error=Run.Error.WORKTREE_UNRESOLVED,
            error_detail=error.detail,
            finished_at=DbNow(),
        )
        run_event(
            run,
            EventType.RUN_NOT_STARTED,
            project_id=issue.project_id,
            data={"error": Run.Error.WORKTREE_UNRESOLVED},
        )
    return run


def run_event(run: Run, type: str, *, project_id: int | None = None, data: dict[str, Any]) -> None:
    """A run's event: ``data`` and the run's id, for its issue, session and agent."""
    if project_id is None:
        project_id = Issue.objects.values_list("project_id", flat=True).get(pk=run.issue_id)
    events.record(
        run.workspace_id,
        type,
        project_id=project_id,
        issue_id=run.issue_id,
        session_id=run.session_id,
        agent_id=run.agent_id,
        data={"run": run.pk, **data},
    )


def record_busy(*, run: Run, worktree: Worktree, holder: WorktreeLock | None) -> WorktreeBusy:
    """Mark ``run`` cancelled for a busy worktree; the caller raises after commit."""
    named = describe_holder(holder)
    detail = (
        f"Worktree {worktree.slug!r} is locked by run {named['run']} of session "
        f"{named['session']} (agent {named['agent']!r}); retry when it finishes."
    )
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.CANCELLED,
        error=Run.Error.WORKTREE_BUSY,
        error_detail=detail,
        finished_at=DbNow(),
    )
    run_event(run, EventType.RUN_NOT_STARTED, data={"error": Run.Error.WORKTREE_BUSY})
    return WorktreeBusy(detail, holder=named, run=run.pk)


def finish_run(*, workspace: Workspace, run_id: int, outcome: str, fence: int | None = None) -> Run:
    """End a running run with ``outcome`` and release its lock as ``released``.

    Compare-and-set on ``status = 'running'``: of two finishers, the second sees
    0 rows and gets ``run_not_running``.

    With ``fence`` (the fence of the run's worktree lock), the lock is released by a
    second compare-and-set, ``released_at IS NULL AND fence = %s``, in the same
    transaction: if the lock was reclaimed meanwhile (``expired``, by a dispatcher
    that found the run's session dead), it matches nothing and the whole finish is
    rolled back with ``stale_fence``: the run stays as it was. On PostgreSQL that
    UPDATE and the reclaim's UPDATE of the lock row queue on its row lock, and the
    second re-checks ``released_at IS NULL``: exactly one of them wins.
    """
    if outcome not in (Run.Status.SUCCEEDED, Run.Status.FAILED):
        raise InvalidInput(f"Outcome must be succeeded or failed, not {outcome!r}.")
    with events.change():
        finished = Run.objects.filter(
            workspace=workspace, pk=run_id, status=Run.Status.RUNNING
        ).update(status=outcome, finished_at=DbNow())
        if not finished:
            run = lookups.get_run(workspace, run_id)  # 404 if not in the workspace
            raise RunNotRunning(f"Run {run.pk} is {run.status}, not running.")
        locks = WorktreeLock.objects.filter(run_id=run_id)
        if fence is None:
            release_unreleased(locks, ReleaseReason.RELEASED)
        else:  # the compare-and-set decides; a lost lock rolls the finish back
            released = release_unreleased(locks.filter(fence=fence), ReleaseReason.RELEASED)
            fences.check(fences.LockFence(run_id), fence, matched=released > 0)
        run = shown_runs(workspace).get(pk=run_id)
        run_event(run, EventType.RUN_FINISHED, data={"outcome": outcome})
    return run


def end_session_runs(*, session: AgentSession, reason: str) -> int:
    """A session that ends cleanly (``agent_ended``): cancel its running runs, then
    release its worktree locks (the order finish_run takes them in); how many locks.

    An ended session can never report its runs, and leaving them ``running`` would
    list work nobody is doing. A session that dies instead keeps its runs ``running``
    (its lock is reclaimed ``expired`` by the next dispatcher): a crash is not
    recorded as an exit, and a revived session may still finish them.
    """
    cancel_runs(
        Run.objects.filter(session=session, status=Run.Status.RUNNING),
        detail=f"Session {session.pk} ended while the run was running.",
    )
    return worktrees.release_session_locks(session=session, reason=reason)


def cancel_runs(runs: Any, *, detail: str) -> list[int]:
    """End the running runs of ``runs`` ``cancelled`` with ``detail`` and announce each
    (``run.finished``); return their ids. Inside ``events.change()``."""
    cancelled = []
    for run in runs.filter(status=Run.Status.RUNNING).order_by("pk"):
        # Compare-and-set per run: a run finished meanwhile keeps its outcome.
        if Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
            status=Run.Status.CANCELLED, error_detail=detail, finished_at=DbNow()
        ):
            run_event(run, EventType.RUN_FINISHED, data={"outcome": Run.Status.CANCELLED})
            cancelled.append(run.pk)
    return cancelled
