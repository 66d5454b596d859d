"""Taking an issue over from a dead holder (invariant 4 (stale reclaim)).

A lease claim that meets a lease no longer live reclaims it in the claim's way
(``reclaim_stale_lease``: released ``expired`` if its holder is dead, ``max_age`` if it
aged out) and tries again (``reclaim``). A new lease that took over dead holders'
leases takes their assignment and their claims on the issue as well (``take_over``).
The claim itself, its WIP cap and its release are ``leases``.
"""

from collections.abc import Sequence

from coordination.db import sql
from coordination.db.rows import dialect, execute, fetchall, fetchone
from coordination.models import AgentSession, IssueLease, ReleaseReason
from coordination.services import events, reclaim


def reclaim_stale_lease(
    lease: IssueLease, *, project_id: int, by: AgentSession, taken_over: list[IssueLease]
) -> None:
    """``lease`` was read in a claim's way, not live: release it (``expired`` if its
    holder is dead, else ``max_age``: invariants 4 (stale reclaim) and 17 (stalled is derived)),
    announce it and ``Retry``; released since it was read: ``Retry``. Returns only if it is live
    again (its holder revived). An ``expired`` lease is added to ``taken_over``; an aged-out
    one is not: its holder is alive and keeps its claims (invariant 17 (stalled is derived))."""
    row = fetchone(sql.release_stale_lease(dialect(), lease_id=lease.pk))
    if row is not None:
        if row[0] == ReleaseReason.EXPIRED:
            taken_over.append(lease)
        events.lease_released(
            lease,
            reason=row[0],
            project_id=project_id,
            by=events.holder(by.pk, by.agent.name),
        )
        raise reclaim.Retry
    if fetchone(sql.unreleased_row(table=IssueLease._meta.db_table, row_id=lease.pk)) is None:
        raise reclaim.Retry


def take_over(
    *,
    workspace_id: int,
    session: AgentSession,
    lease: IssueLease,
    taken_over: Sequence[IssueLease],
) -> None:
    """A new lease's agent becomes the issue's assignee if it has none, or if it is an
    agent whose dead lease this claim took over (``taken_over``; whom a person or a live
    agent assigned stays); the dead holders' claims on the issue are released
    ``expired`` by the taker, as the next claimer of their paths would (invariant 4
    (stale reclaim)), with their ``claims.released``. Their claims on other issues
    stay, for those paths' next claimers. Call it last in the claim's transaction: the
    issue row, then the claim rows in path order (``coordination.services.locking``)."""
    issue = lease.issue  # read under the claim's share: its assignee is current
    dead_agents = [dead.agent_id for dead in taken_over if dead.agent_id is not None]
    if issue.assignee_id is None or issue.assignee_id in dead_agents:
        statement = sql.assign_unassigned_issue(
            dialect(), issue_id=issue.pk, agent_id=session.agent_id, replacing=dead_agents
        )
        execute(statement)
    taker = events.holder(session.pk, session.agent.name)
    for dead in taken_over:
        if dead.session_id is None:  # its session is gone: its claims have no holder
            continue
        statement = sql.release_claims(
            dialect(),
            reason=ReleaseReason.EXPIRED,
            workspace_id=workspace_id,
            issue_id=issue.pk,
            session_id=dead.session_id,
            holder_dead=True,
        )
        released = [sql.ReleasedClaim(*row[:5]) for row in fetchall(statement)]
        if released:
            events.claims_released(workspace_id, released, reason=ReleaseReason.EXPIRED, by=taker)
