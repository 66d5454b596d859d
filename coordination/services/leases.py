"""Issue leases: exclusive ownership of an issue, admitted by the project's WIP cap."""

from dataclasses import dataclass

from django.db import OperationalError, connection, transaction

from coordination import selectors
from coordination.errors import (
    InvalidTransition,
    LeaseHeld,
    LeaseNotHeld,
    SessionNotLive,
    StaleFence,
    WipLimitReached,
)
from coordination.liveness import db_now_sql, live_session_sql
from coordination.models import (
    Agent,
    AgentSession,
    Issue,
    IssueLease,
    Project,
    ReleaseReason,
    WipCapDenial,
    Workspace,
)
from coordination.services.common import release_if_holder_dead, release_unreleased

LEASE = IssueLease._meta.db_table
SESSION = AgentSession._meta.db_table
ISSUE = Issue._meta.db_table
PROJECT = Project._meta.db_table


@dataclass(frozen=True)
class Claimed:
    lease: IssueLease
    created: bool


def lock_project(project_id: int) -> int:
    """Serialise admission per project for the rest of the transaction (invariant 3),
    and return the project's WIP limit as read under that lock.

    Under READ COMMITTED, two claimers would each count ``cap - 1`` live leases and
    both insert, so PostgreSQL takes the project's row lock first. NO KEY UPDATE
    conflicts with itself (claimers queue) but not with the foreign-key checks of
    rows that merely point at the project (new issues, denials). SQLite needs no
    lock: ``BEGIN IMMEDIATE`` already made this transaction the only writer.
    """
    lock = " FOR NO KEY UPDATE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT agent_wip_limit FROM {PROJECT} WHERE id = %s{lock}", [project_id])
        (limit,) = cursor.fetchone()
    return int(limit)


def share_lock_issue(issue_id: int) -> str:
    """The issue's status, read under a share lock on PostgreSQL.

    Closing an issue locks it ``FOR NO KEY UPDATE`` and then releases its lease; the
    share lock orders this claim against such a close, so a lease can never be
    admitted on an issue whose close is committing (it would outlive the close).
    """
    lock = " FOR SHARE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT status FROM {ISSUE} WHERE id = %s{lock}", [issue_id])
        (status,) = cursor.fetchone()
    return str(status)


def insert_lease_within_cap(
    *, workspace_id: int, issue: Issue, session: AgentSession, limit: int
) -> int | None:
    """Insert the lease iff the project's live leases are below ``limit``.

    One statement: the count and the insert cannot be split by another claimer of
    this project (the project lock is held), and the partial unique index turns a
    second unreleased lease on the issue into "no row" instead of an error.

    The fence is ``MAX(fence) + 1`` over every lease row of the issue, released ones
    included (rows are never deleted while their issue exists), computed in this same
    statement. Why that is monotonic and never reused, rather than a counter column:

    - PostgreSQL (READ COMMITTED): every lease insert runs here, inside
      ``claim_issue``'s transaction, after ``lock_project``. All claimers of an issue
      lock its project, so they queue on that row lock, and this statement's snapshot
      is taken after the lock was granted: it sees every lease an earlier claimer
      committed, and no other claimer of the issue can have one in flight. A release
      only sets ``released_at``, so it never lowers the maximum. The unique
      constraint ``lease_fence_unique`` (issue, fence) is the database's proof: were
      the project lock ever bypassed, a duplicate would be an error, never a reuse.
    - SQLite: ``BEGIN IMMEDIATE`` made this transaction the only writer.
    - A lease whose transaction rolls back (a refused start_work) was never given to
      anyone, so its number is free to be issued.

    A counter on the issue row would need an UPDATE of the issue in every claim: a
    row lock that conflicts with the ``FOR SHARE`` the claim, file claims and closes
    order themselves by, and a rebuild of a guarded table on SQLite (0003).
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {LEASE} (workspace_id, issue_id, session_id, agent_id,
                                 acquired_at, release_reason, fence)
            SELECT %s, %s, %s, %s, {db_now_sql()}, '',
                   (SELECT COALESCE(MAX(f.fence), 0) + 1 FROM {LEASE} f WHERE f.issue_id = %s)
            WHERE (SELECT count(*) FROM {LEASE} l
                   JOIN {ISSUE} i ON i.id = l.issue_id
                   JOIN {SESSION} s ON s.id = l.session_id
                   WHERE i.project_id = %s AND l.released_at IS NULL
                     AND {live_session_sql("s")}) < %s
            ON CONFLICT (workspace_id, issue_id) WHERE released_at IS NULL DO NOTHING
            RETURNING id
            """,
            [
                workspace_id,
                issue.pk,
                session.pk,
                session.agent_id,
                issue.pk,
                issue.project_id,
                limit,
            ],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def lease_held(lease: IssueLease) -> LeaseHeld:
    return LeaseHeld(
        f"Issue {lease.issue_id} is leased by a live session.",
        holder={"session": lease.session_id, "agent": lease.agent.name if lease.agent else None},
    )


def claim_issue(*, workspace: Workspace, issue_id: int, session_id: int) -> Claimed:
    """Take the issue's lease for a live session (invariants 2, 3, 4, 8).

    A dead holder's lease is reclaimed ``expired`` in this call. A WIP refusal is
    raised only after the transaction commits, so its denial row survives.
    """
    issue = selectors.get_issue(workspace, issue_id)
    session = selectors.get_session(workspace, session_id)
    with transaction.atomic():
        limit = lock_project(issue.project_id)
        status = share_lock_issue(issue.pk)
        if status in Issue.CLOSED_STATUSES:
            raise InvalidTransition(f"Issue {issue.pk} is {status}; reopen it to work on it.")
        if not selectors.is_live(session):
            raise SessionNotLive(f"Session {session.pk} is not live.")
        current = (
            IssueLease.objects.unreleased()
            .with_live()
            .select_related("agent")
            .filter(issue=issue)
            .first()
        )
        if current is not None:
            if current.session_id == session.pk:
                return Claimed(lease=current, created=False)
            if current.is_live:  # type: ignore[attr-defined]
                raise lease_held(current)
            # A dead holder's lease is reclaimed. If that finds nothing to release, its
            # holder either came back (the insert below meets its unreleased lease:
            # lease_held) or released it itself (e.g. with its fence) since we looked:
            # then the issue is free, and this claim takes it with the next fence.
            release_if_holder_dead(current)
        lease_id = insert_lease_within_cap(
            workspace_id=workspace.pk, issue=issue, session=session, limit=limit
        )
        if lease_id is None:
            raced = IssueLease.objects.unreleased().select_related("agent").filter(issue=issue)
            if (winner := raced.first()) is not None:  # the unique index said no, not the cap
                raise lease_held(winner)
            record_denial(
                workspace=workspace, issue=issue, session=session, agent=session.agent, limit=limit
            )
    if lease_id is None:
        raise WipLimitReached(
            f"Project {issue.project.key} already has {limit} live leases.", limit=limit
        )
    return Claimed(lease=selectors.leases(workspace).get(pk=lease_id), created=True)


def record_denial(
    *, workspace: Workspace, issue: Issue, session: AgentSession | None, agent: Agent, limit: int
) -> WipCapDenial:
    """The append-only record of a claim the WIP cap refused (invariants 3, 8)."""
    return WipCapDenial.objects.create(
        workspace=workspace,
        project_id=issue.project_id,
        issue=issue,
        session=session,
        agent=agent,
        limit=limit,
    )


def release_issue(
    *, workspace: Workspace, issue_id: int, session_id: int, fence: int | None = None
) -> IssueLease:
    """Explicit release by the holding session.

    With ``fence``, only the unreleased lease of that fence is released, in one
    compare-and-set statement: a lease reclaimed meanwhile (released ``expired`` by
    another claimer) no longer matches, so a holder that lost it while paused gets
    ``stale_fence`` and changes nothing. On PostgreSQL the UPDATE and a reclaim's
    UPDATE of the same row queue on its row lock, and the second re-checks
    ``released_at IS NULL`` on the row the first committed: exactly one wins.
    """
    issue = selectors.get_issue(workspace, issue_id)
    session = selectors.get_session(workspace, session_id)
    if fence is not None:
        held = IssueLease.objects.filter(issue=issue, session=session, fence=fence)
        if not release_unreleased(held, ReleaseReason.RELEASED):
            if lease_fence(issue.pk) != fence:
                raise stale_fence(issue_id=issue.pk, fence=fence)
            raise LeaseNotHeld(f"Session {session.pk} holds no lease on issue {issue.pk}.")
        return selectors.leases(workspace).get(issue=issue, fence=fence)
    lease = IssueLease.objects.unreleased().filter(issue=issue, session=session).first()
    if lease is None or not release_unreleased(
        IssueLease.objects.filter(pk=lease.pk), ReleaseReason.RELEASED
    ):
        raise LeaseNotHeld(f"Session {session.pk} holds no lease on issue {issue.pk}.")
    return selectors.leases(workspace).get(pk=lease.pk)


# --- fences ---------------------------------------------------------------------------


def lease_fence(issue_id: int, *, lock: bool = False) -> int | None:
    """The fence of the issue's unreleased lease, or None if it has none.

    With ``lock`` (PostgreSQL), the lease row is read ``FOR SHARE``: a reclaim,
    release or close, which UPDATE that row, wait until this transaction ends, so
    the fence stays current until then. If one of them is committing, this read waits
    for it and re-checks ``released_at IS NULL`` on the new row: it then finds no
    lease, never the old fence.
    """
    suffix = " FOR SHARE" if lock and connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT fence FROM {LEASE} WHERE issue_id = %s AND released_at IS NULL{suffix}",
            [issue_id],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else None


class IssueLocked(Exception):
    """The issue's row is locked for a change (a close, a transition): the caller
    rolls back, waits for that lock alone (``wait_for_issue``) and tries again."""


# PostgreSQL's lock_not_available, raised by NOWAIT.
LOCK_NOT_AVAILABLE = "55P03"


def check_lease_fence(*, issue_id: int, fence: int) -> None:
    """Raise ``stale_fence`` unless ``fence`` is the issue's unreleased lease's, and
    keep it so for the rest of the transaction. Call it first in the transaction.

    PostgreSQL: the lease row, then the issue row, both ``FOR SHARE`` until commit:
    a reclaim, release or close must UPDATE the lease row, so it waits for this
    transaction. The order avoids both cycles that could form here:

    - a reclaiming ``start_work`` holds the lease row (updated), then takes path
      locks and may lock its issue ``FOR NO KEY UPDATE`` (todo to in_progress): so
      this waits for the lease row holding nothing, not even the issue;
    - a close (or ``finish_work``) holds the issue ``FOR NO KEY UPDATE``, then
      updates the lease row: so the issue is taken ``NOWAIT`` while the lease share
      is held, and if it is locked, ``IssueLocked`` rolls everything back for the
      caller to wait for the issue alone and try again.

    SQLite: ``BEGIN IMMEDIATE`` made this transaction the only writer.
    """
    if lease_fence(issue_id, lock=True) != fence:
        raise stale_fence(issue_id=issue_id, fence=fence)
    if connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic(), connection.cursor() as cursor:  # a savepoint
            cursor.execute(f"SELECT id FROM {ISSUE} WHERE id = %s FOR SHARE NOWAIT", [issue_id])
    except OperationalError as error:
        cause = error.__cause__
        if getattr(cause, "sqlstate", None) == LOCK_NOT_AVAILABLE:
            raise IssueLocked(issue_id) from None
        raise


def wait_for_issue(issue_id: int) -> None:
    """Wait, holding nothing else, until whoever locked the issue row commits."""
    with transaction.atomic():
        share_lock_issue(issue_id)


def stale_fence(*, issue_id: int, fence: int) -> StaleFence:
    """The refusal of a lease fence that is not the issue's current one."""
    current = lease_fence(issue_id)
    held = f"its current lease has fence {current}" if current else "it has no unreleased lease"
    return StaleFence(
        f"Fence {fence} is not the current lease's on issue {issue_id} ({held}): "
        "the lease was lost; nothing was changed.",
        fence=fence,
        current_fence=current,
    )


def release_session_leases(*, session: AgentSession, reason: str) -> int:
    return release_unreleased(IssueLease.objects.filter(session=session), reason)


def release_issue_leases(*, issue: Issue, reason: str) -> int:
    return release_unreleased(IssueLease.objects.filter(issue=issue), reason)
