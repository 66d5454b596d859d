"""Worktrees, the lock a run takes on one, and which lock that is (invariant 10 (lock mode per
run)).

A run that mutates a working tree holds that worktree exclusively; a run that
touches no files (planning, drafting, review of text) holds nothing and runs fully
in parallel. Which of the two a run gets is decided in one place,
``resolve_run_lock``, from the issue's own state; a misconfiguration is a recorded,
visible error, never a silent serialisation on some other worktree. Dispatching and
finishing the runs themselves: ``coordination.services.runs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias, assert_never

from django.db import IntegrityError

from coordination.db import sql
from coordination.db.rows import dialect, fetchone
from coordination.errors import InvalidInput, WorktreeUnresolved
from coordination.models import (
    Agent,
    AgentSession,
    Issue,
    Run,
    Workspace,
    Worktree,
    WorktreeLock,
)
from coordination.services import events, reclaim
from coordination.services.common import release_unreleased
from coordination.services.locking import lock_worktree

# --- worktrees ----------------------------------------------------------------


def create_worktree(
    *, workspace: Workspace, slug: str, name: str, path: str = "", branch: str = ""
) -> Worktree:
    try:
        with events.change():
            return Worktree.objects.create(
                workspace=workspace, slug=slug, name=name, path=path, branch=branch
            )
    except IntegrityError:
        raise InvalidInput(f"Worktree {slug!r} already exists.", field="slug") from None


# --- resolution: the decision table of invariant 10 (lock mode per run) ---------------------------


@dataclass(frozen=True)
class NoLock:
    """The run touches no files: no lock, no worktree, fully parallel."""

    lock_mode: ClassVar[str] = Run.LockMode.NONE


@dataclass(frozen=True)
class ExclusiveLock:
    """The run mutates ``worktree`` and must be its only writer."""

    worktree: Worktree
    lock_mode: ClassVar[str] = Run.LockMode.EXCLUSIVE


# Only ExclusiveLock has a worktree, so reading one off an unnarrowed resolution is a
# type error: "exclusive without a worktree" and "none with a worktree" cannot be
# written (mypy checks this module).
RunLock: TypeAlias = NoLock | ExclusiveLock


class WorktreeConfigurationError(WorktreeUnresolved):
    """The issue needs a filesystem but nothing names a worktree for it (422)."""


def resolve_run_lock(*, issue: Issue, agent: Agent) -> RunLock:
    """Decide the run's lock from the issue's own state, in this order:

    1. the issue names a worktree → exclusive on it;
    2. the issue requires a filesystem → exclusive on the agent's bound worktree,
       else on the project's primary worktree, else ``WorktreeConfigurationError``;
    3. otherwise → no lock and no worktree.

    Never "any worktree of the workspace": guessing would serialise unrelated runs
    on a checkout nobody chose, or let two writers share one unknowingly.
    """
    if issue.worktree is not None:
        return ExclusiveLock(worktree=_same_workspace(issue.worktree, issue=issue))
    if not issue.requires_filesystem:
        return NoLock()
    if agent.worktree is not None:
        return ExclusiveLock(worktree=_same_workspace(agent.worktree, issue=issue))
    primary = issue.project.primary_worktree
    if primary is not None:
        return ExclusiveLock(worktree=_same_workspace(primary, issue=issue))
    raise WorktreeConfigurationError(
        f"Issue {issue.pk} requires a filesystem but no worktree is configured for it: "
        f"set the issue's worktree, bind agent {agent.name!r} to a worktree "
        f'(register with "worktree"), or set a primary worktree on project '
        f"{issue.project.key!r}."
    )


def primary_worktree_lock(*, issue: Issue) -> ExclusiveLock:
    """Exclusive on the project's primary worktree (the caller checked it has one)."""
    primary = issue.project.primary_worktree
    assert primary is not None
    return ExclusiveLock(worktree=_same_workspace(primary, issue=issue))


def _same_workspace(worktree: Worktree, *, issue: Issue) -> Worktree:
    # Invariant 9 (workspace isolation): a foreign key set by hand (admin, import) must not lend
    # another tenant's checkout; treat it as a configuration error, not as a lock target.
    if worktree.workspace_id != issue.workspace_id:
        raise WorktreeConfigurationError(
            f"Worktree {worktree.slug!r} belongs to another workspace; "
            f"configure a worktree of this workspace for issue {issue.pk}."
        )
    return worktree


def lock_fields(lock: RunLock) -> dict[str, Any]:
    """The run's columns for a resolution; exhaustive, so a new kind fails mypy."""
    match lock:
        case ExclusiveLock(worktree=worktree):
            return {"lock_mode": lock.lock_mode, "worktree": worktree}
        case NoLock():
            return {"lock_mode": lock.lock_mode, "worktree": None}
        case _:
            assert_never(lock)


# --- locks ----------------------------------------------------------------------


def insert_lock(*, workspace_id: int, worktree_id: int, session_id: int, run_id: int) -> int | None:
    """Take the worktree's lock for ``run``, or return None if it is held.

    Invariants 10 (lock mode per run) and 4 (stale reclaim): one writer per worktree. The partial
    unique index ``one_unreleased_lock_per_worktree`` is the guard, so concurrent dispatchers
    cannot both win; ON CONFLICT turns the loser's insert into "no row" instead of an
    IntegrityError that would abort the PostgreSQL transaction holding its run.

    The fence is ``MAX(fence) + 1`` over every lock row of the worktree (released
    ones included; rows are never deleted while their worktree exists), computed in
    the insert. Dispatchers share no project lock, and under READ COMMITTED the
    insert's snapshot could predate a lock that another dispatcher commits, and a
    third releases, before this insert checks the unique index: it would then reuse
    that number. So PostgreSQL first locks the worktree row ``FOR NO KEY UPDATE``
    (held until this transaction ends; it does not conflict with the ``KEY SHARE``
    of foreign-key checks and link guards): inserters of one worktree queue, and each
    insert's snapshot sees every lock committed before it. SQLite's ``BEGIN
    IMMEDIATE`` already made this the only writer. The unique constraint
    ``lock_fence_unique`` (worktree, fence) proves "never reused" in the database.
    A counter on the worktree row would need that row lock too, plus a rebuild of a
    guarded table on SQLite (0003), for nothing more.
    """
    lock_worktree(worktree_id)
    row = fetchone(
        sql.insert_worktree_lock(
            dialect(),
            workspace_id=workspace_id,
            worktree_id=worktree_id,
            session_id=session_id,
            run_id=run_id,
        )
    )
    return row[0] if row else None


def current_lock(worktree: Worktree) -> WorktreeLock | None:
    return (
        WorktreeLock.objects.filter(worktree=worktree, released_at__isnull=True)
        .select_related("session__agent")
        .first()
    )


@dataclass(frozen=True)
class Busy:
    """The worktree is held; ``holder`` is None only if it kept changing hands."""

    holder: WorktreeLock | None


def acquire_worktree_lock(*, run: Run, worktree: Worktree) -> Busy | None:
    """Lock ``worktree`` for ``run``: None on success, else who holds it.

    A dead holder's lock is reclaimed ``expired`` in this call (invariant 4 (stale reclaim)), then
    the insert is tried again (``reclaim``); once the attempts are spent, the
    worktree is plainly contended and is reported busy rather than spun on.
    """
    session_id = run.session_id
    assert session_id is not None  # a dispatched run always has its session

    def attempt(number: int) -> Busy | None:
        if insert_lock(
            workspace_id=run.workspace_id,
            worktree_id=worktree.pk,
            session_id=session_id,
            run_id=run.pk,
        ):
            return None
        holder = current_lock(worktree)
        if holder is None:  # released since the insert met it
            raise reclaim.Retry
        reclaim.clear_the_way(holder)
        return Busy(holder=holder)

    return reclaim.attempts(attempt, exhausted=lambda: Busy(holder=current_lock(worktree)))


def describe_holder(lock: WorktreeLock | None) -> dict[str, Any]:
    session = lock.session if lock is not None else None
    return {
        "session": lock.session_id if lock is not None else None,
        "agent": session.agent.name if session is not None else None,
        "run": lock.run_id if lock is not None else None,
    }


def release_session_locks(*, session: AgentSession, reason: str) -> int:
    """Release the session's unreleased worktree locks with ``reason``; how many."""
    return release_unreleased(WorktreeLock.objects.filter(session=session), reason)
