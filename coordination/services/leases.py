"""Issue leases: exclusive ownership of an issue, admitted by the project's WIP cap."""

from dataclasses import dataclass
from typing import Any

from coordination import selectors
from coordination.errors import (
    InvalidTransition,
    LeaseHeld,
    LeaseNotHeld,
    SessionNotLive,
    StaleFence,
    WipLimitReached,
)
from coordination.models import (
    Agent,
    AgentSession,
    EventType,
    Issue,
    IssueLease,
    ReleaseReason,
    WipCapDenial,
    Workspace,
)
from coordination.services import events, sql
from coordination.services.common import release_if_holder_dead
from coordination.services.locking import (
    lock_project,
    share_issue_nowait,
    share_lease_fence,
    share_lock_issue,
)
from coordination.services.rows import dialect, execute, fetchall, fetchone, instance


@dataclass(frozen=True)
class Claimed:
    lease: IssueLease
    created: bool


def insert_lease_within_cap(
    *, workspace_id: int, issue: Issue, session: AgentSession, limit: int
) -> tuple[int, int] | None:
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
    row = fetchone(
        sql.insert_lease_within_cap(
            dialect(),
            workspace_id=workspace_id,
            issue_id=issue.pk,
            session_id=session.pk,
            agent_id=session.agent_id,
            project_id=issue.project_id,
            limit=limit,
        )
    )
    return (int(row[0]), int(row[1])) if row else None


def lease_held(lease: IssueLease) -> LeaseHeld:
    return LeaseHeld(
        f"Issue {lease.issue_id} is leased by a live session.",
        holder={"session": lease.session_id, "agent": lease.agent.name if lease.agent else None},
    )


def claim_issue(
    *, workspace: Workspace, issue_id: int, session_id: int, assign: bool = True
) -> Claimed:
    """Take the issue's lease for a live session (invariants 2, 3, 4, 8).

    A dead holder's lease is reclaimed ``expired`` in this call. A WIP refusal is
    raised only after the transaction commits, so its denial row survives. A new
    lease makes its agent the issue's assignee if it has none (``assign``; start_work
    assigns later in its own transaction, ``coordination.services.locking`` says why).
    """
    issue = selectors.get_issue(workspace, issue_id)
    session = selectors.get_session(workspace, session_id)
    with events.change():
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
            if release_if_holder_dead(current):
                events.lease_released(
                    current,
                    reason=ReleaseReason.EXPIRED,
                    project_id=issue.project_id,
                    by=events.holder(session.pk, session.agent.name),
                )
        inserted = insert_lease_within_cap(
            workspace_id=workspace.pk, issue=issue, session=session, limit=limit
        )
        if inserted is None:
            raced = IssueLease.objects.unreleased().select_related("agent").filter(issue=issue)
            if (winner := raced.first()) is not None:  # the unique index said no, not the cap
                raise lease_held(winner)
            record_denial(
                workspace=workspace, issue=issue, session=session, agent=session.agent, limit=limit
            )
        else:
            lease_id, fence = inserted
            events.record(
                workspace.pk,
                EventType.LEASE_GRANTED,
                project_id=issue.project_id,
                issue_id=issue.pk,
                session_id=session.pk,
                agent_id=session.agent_id,
                data={"lease": lease_id, "fence": fence},
            )
            if assign:
                # Last: it turns the issue's share into a row lock, held only to the commit.
                assign_if_unassigned(issue_id=issue.pk, agent_id=session.agent_id)
    if inserted is None:
        raise WipLimitReached(
            f"Project {issue.project.key} already has {limit} live leases.", limit=limit
        )
    return Claimed(lease=selectors.leases(workspace).get(pk=lease_id), created=True)


def assign_if_unassigned(*, issue_id: int, agent_id: int) -> bool:
    """Make the agent the issue's assignee when it has none; never replace one."""
    return bool(
        execute(sql.assign_unassigned_issue(dialect(), issue_id=issue_id, agent_id=agent_id))
    )


def record_denial(
    *, workspace: Workspace, issue: Issue, session: AgentSession | None, agent: Agent, limit: int
) -> WipCapDenial:
    """The append-only record of a claim the WIP cap refused (invariants 3, 8), and
    its ``wip.denied`` event. Call it inside ``events.change()``."""
    denial = WipCapDenial.objects.create(
        workspace=workspace,
        project_id=issue.project_id,
        issue=issue,
        session=session,
        agent=agent,
        limit=limit,
    )
    events.record(
        workspace.pk,
        EventType.WIP_DENIED,
        project_id=issue.project_id,
        issue_id=issue.pk,
        session_id=session.pk if session is not None else None,
        agent_id=agent.pk,
        data={"limit": limit},
    )
    return denial


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
    with events.change():
        released = release_leases(
            reason=ReleaseReason.RELEASED,
            project_id=issue.project_id,
            issue_id=issue.pk,
            session_id=session.pk,
            fence=fence,
        )
        if not released:
            if fence is not None and lease_fence(issue.pk) != fence:
                raise stale_fence(issue_id=issue.pk, fence=fence)
            raise LeaseNotHeld(f"Session {session.pk} holds no lease on issue {issue.pk}.")
    return selectors.leases(workspace).get(pk=released[0].pk)


def release_leases(
    *,
    reason: str,
    project_id: int | None = None,
    by: dict[str, Any] | None = None,
    lease_id: int | None = None,
    issue_id: int | None = None,
    session_id: int | None = None,
    fence: int | None = None,
) -> list[IssueLease]:
    """Release the unreleased leases matching every filter given with ``reason``, in
    one compare-and-set statement, and announce each (``lease.released``, ``by``: who
    took it). Call it inside ``events.change()``."""
    statement = sql.release_leases(
        dialect(),
        reason=reason,
        lease_id=lease_id,
        issue_id=issue_id,
        session_id=session_id,
        fence=fence,
    )
    released = [instance(IssueLease, row) for row in fetchall(statement)]
    projects: dict[int, int] = {}
    if released and project_id is None:
        projects = dict(
            Issue.objects.filter(pk__in={lease.issue_id for lease in released}).values_list(
                "id", "project_id"
            )
        )
    for lease in released:
        events.lease_released(
            lease, reason=reason, project_id=project_id or projects.get(lease.issue_id), by=by
        )
    return released


# --- fences ---------------------------------------------------------------------------


def lease_fence(issue_id: int) -> int | None:
    """The fence of the issue's unreleased lease, or None if it has none."""
    row = fetchone(sql.lease_fence(dialect(), issue_id=issue_id, share=False))
    return int(row[0]) if row else None


def check_lease_fence(*, issue_id: int, fence: int) -> None:
    """Raise ``stale_fence`` unless ``fence`` is the issue's unreleased lease's, and
    keep it so for the rest of the transaction. Call it first in the transaction:
    it takes the lease row before the issue (``coordination.services.locking`` says
    why that order, and why the issue is asked for ``NOWAIT``); ``IssueLocked``
    means roll back, wait for the issue alone and try again."""
    if share_lease_fence(issue_id) != fence:
        raise stale_fence(issue_id=issue_id, fence=fence)
    share_issue_nowait(issue_id)


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
    return len(release_leases(reason=reason, session_id=session.pk))


def release_issue_leases(*, issue: Issue, reason: str) -> int:
    return len(release_leases(reason=reason, project_id=issue.project_id, issue_id=issue.pk))
