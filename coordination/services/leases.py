"""Issue leases: exclusive ownership of an issue, admitted by the project's WIP cap.

A lease's claim and release are SQL (``coordination.db.sql.leases``), as the
file claims are: the rows come back as fully loaded instances, shown as
``selectors.claims.leases`` shows them (``is_live``, the agent), with no read after.
A dead holder's lease reclaimed on the way, and the issue taken over from it, are
``takeover``.
"""

from dataclasses import dataclass
from typing import Any

from coordination.db import sql
from coordination.db.rows import dialect, execute, fetchall, fetchone, instance, take
from coordination.errors import (
    InvalidInput,
    InvalidTransition,
    LeaseHeld,
    LeaseNotHeld,
    NotFound,
    SessionNotLive,
    WipLimitReached,
)
from coordination.liveness import DbNow
from coordination.models import (
    Agent,
    AgentSession,
    EventType,
    Issue,
    IssueLease,
    Project,
    ReleaseReason,
    WipCapDenial,
    Workspace,
)
from coordination.selectors import lookups
from coordination.selectors.sessions import is_live
from coordination.services import events, fences, logs, reclaim, takeover
from coordination.services.locking import lock_project


@dataclass(frozen=True)
class Claimed:
    """``taken_over``: the leases of dead holders this claim reclaimed ``expired``
    to get its own (``takeover.take_over`` hands it their assignment and claims)."""

    lease: IssueLease
    created: bool
    taken_over: tuple[IssueLease, ...] = ()


@dataclass(frozen=True)
class Claimer:
    """What a lease claim reads under the issue's share: the issue, with its project,
    and the claiming session, with its agent."""

    issue: Issue
    session: AgentSession


def share_claimed_issue(
    *, workspace: Workspace, project: Project, issue_id: int, session_id: int
) -> Claimer:
    """The issue ``FOR SHARE`` (after its project: ``locking``) with the claiming
    session; 400 if the workspace has no such session."""
    statement = sql.share_claimed_issue(
        dialect(), workspace_id=workspace.pk, issue_id=issue_id, session_id=session_id
    )
    row = fetchone(statement)
    if row is None:  # its project was found through it a statement ago: deleted since
        raise NotFound(f"Issue {issue_id} does not exist.")
    issue, at = take(Issue, row, 0)
    session, at = take(AgentSession, row, at)
    if session is None:
        raise InvalidInput(f"Session {session_id} does not exist.")
    agent, _ = take(Agent, row, at)
    assert issue is not None and agent is not None
    issue.project = project
    session.agent = agent
    return Claimer(issue=issue, session=session)


def insert_lease_within_cap(
    *, workspace_id: int, issue: Issue, session: AgentSession, limit: int
) -> IssueLease | None:
    """Insert the lease iff its session is live and the project's live leases are
    below ``limit``: the new lease as ``selectors.claims.leases`` shows it, or None.

    One statement: the count and the insert cannot be split by another claimer of
    this project (the project lock is held), and the partial unique index turns a
    second unreleased lease on the issue into "no row" instead of an error. The
    session's liveness is judged in it as well, by the statement's clock, so the
    lease it returns is live by that clock; its agent is the session's.

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
    statement = sql.insert_lease_within_cap(
        dialect(),
        workspace_id=workspace_id,
        issue_id=issue.pk,
        session_id=session.pk,
        agent_id=session.agent_id,
        project_id=issue.project_id,
        limit=limit,
    )
    row = fetchone(statement)
    if row is None:
        return None
    lease = instance(IssueLease, row)
    lease.is_live = True  # type: ignore[attr-defined]  # the insert judged it so
    lease.agent = session.agent
    return lease


def unreleased_lease(issue_id: int) -> IssueLease | None:
    """The issue's unreleased lease, with ``is_live`` and its agent, or None."""
    row = fetchone(sql.unreleased_lease(dialect(), issue_id=issue_id))
    if row is None:
        return None
    lease, at = take(IssueLease, row, 0)
    assert lease is not None
    lease.is_live = bool(row[at])  # type: ignore[attr-defined]
    lease.aged_out = bool(row[at + 1])  # type: ignore[attr-defined]
    lease.agent, _ = take(Agent, row, at + 2)
    return lease


def lease_held(lease: IssueLease) -> LeaseHeld:
    return LeaseHeld(
        f"Issue {lease.issue_id} is leased by a live session.",
        holder={"session": lease.session_id, "agent": lease.agent.name if lease.agent else None},
    )


@dataclass(frozen=True)
class Capped:
    """The WIP cap refused a claim (invariant 3 (the WIP cap)): what its denial row names,
    and its 409."""

    issue: Issue
    session: AgentSession
    project: Project
    limit: int

    def error(self) -> WipLimitReached:
        return WipLimitReached(
            f"Project {self.project.key} already has {self.limit} live leases.", limit=self.limit
        )


def claim_issue(
    *, workspace: Workspace, issue_id: int, session_id: int, assign: bool = True
) -> Claimed:
    """Take the issue's lease for a live session (invariants 2 (one live lease per issue), 3 (the
    WIP cap), 4 (stale reclaim) and 8 (append-only logs)).

    A claim that succeeds makes four statements in its transaction: the project's
    lock, the issue's share (with the session), the insert (admission, liveness,
    fence) and its event (on PostgreSQL, with the event writer's lock before it); the
    lease comes back from the insert. Only a claim the insert refused reads on, to
    say why: the session is not live, it holds the lease already (200), another live
    session holds it, or the WIP cap. A dead holder's lease is reclaimed ``expired``
    in this call and the insert tried again (``reclaim``). A WIP refusal writes its
    denial row and is raised only after the transaction commits, so the row survives.
    A new lease makes its agent the issue's assignee if it has none (``assign``;
    start_work assigns later in its own transaction, ``coordination.services.locking``
    says why); an assignee read under the share stays until the commit, so an issue
    that has one is not written. A lease taken over from a dead holder takes its
    assignment and its claims on the issue as well (``takeover``).
    """
    with events.change():
        outcome = claim_or_capped(
            workspace=workspace, issue_id=issue_id, session_id=session_id, assign=assign
        )
        if isinstance(outcome, Capped):
            record_denial(
                workspace=workspace,
                issue=outcome.issue,
                session=outcome.session,
                agent=outcome.session.agent,
                limit=outcome.limit,
            )
    if isinstance(outcome, Capped):
        raise outcome.error()
    return outcome


def claim_or_capped(
    *, workspace: Workspace, issue_id: int, session_id: int, assign: bool = True
) -> Claimed | Capped:
    """``claim_issue`` as a step of the caller's ``events.change()``: a WIP refusal is
    returned, its denial not written and not raised, so a caller that rolls its change
    back (``start_work``) writes the denial once, after the rollback."""
    assert events.buffering(), "a lease claim's statements belong to one change"
    project = lock_project(workspace_id=workspace.pk, issue_id=issue_id)
    claimer = share_claimed_issue(
        workspace=workspace, project=project, issue_id=issue_id, session_id=session_id
    )
    issue, session, limit = claimer.issue, claimer.session, project.agent_wip_limit
    if issue.status in Issue.CLOSED_STATUSES:
        raise InvalidTransition(f"Issue {issue.pk} is {issue.status}; reopen it to work on it.")
    taken_over: list[IssueLease] = []  # kept across attempts: a reclaim is not undone

    def attempt(number: int) -> Claimed | None:
        return take_lease(
            workspace_id=workspace.pk,
            issue=issue,
            session=session,
            limit=limit,
            first=number == 0,
            taken_over=taken_over,
        )

    claimed = reclaim.attempts(attempt, exhausted=lambda: held_or_capped(issue.pk))
    if claimed is None:
        return Capped(issue=issue, session=session, project=project, limit=limit)
    if not claimed.created:
        return claimed
    lease = claimed.lease
    lease.issue = issue  # as read under the share, held to the commit
    claimed = Claimed(lease=lease, created=True, taken_over=tuple(taken_over))
    events.record(
        workspace.pk,
        EventType.LEASE_GRANTED,
        project_id=issue.project_id,
        issue_id=issue.pk,
        session_id=session.pk,
        agent_id=session.agent_id,
        data={"lease": lease.pk, "fence": lease.fence},
    )
    if assign:
        # Last: it turns the issue's share into a row lock, held only to the commit.
        takeover.take_over(
            workspace_id=workspace.pk,
            session=session,
            lease=lease,
            taken_over=claimed.taken_over,
        )
    return claimed


def take_lease(
    *,
    workspace_id: int,
    issue: Issue,
    session: AgentSession,
    limit: int,
    first: bool,
    taken_over: list[IssueLease],
) -> Claimed | None:
    """One attempt of ``claim_issue``: the insert and, if it refused, why (``reclaim``
    gives the attempts). None: the WIP cap refused it. A dead holder's lease it
    reclaims is added to ``taken_over``."""
    lease = insert_lease_within_cap(
        workspace_id=workspace_id, issue=issue, session=session, limit=limit
    )
    if lease is not None:
        return Claimed(lease=lease, created=True)
    if first and not is_live(session):  # the insert judged it; asked once why it refused
        raise SessionNotLive(f"Session {session.pk} is not live.")
    current = unreleased_lease(issue.pk)
    if current is None:
        # The cap, or the lease the insert met was released since (a release takes no
        # project lock): a second insert tells them apart, meeting the cap again.
        if first:
            raise reclaim.Retry
        return None
    if current.session_id == session.pk and current.is_live:  # type: ignore[attr-defined]
        return Claimed(lease=current, created=False)
    if not current.is_live:  # type: ignore[attr-defined]
        takeover.reclaim_stale_lease(
            current, project_id=issue.project_id, by=session, taken_over=taken_over
        )
    raise lease_held(current)


def held_or_capped(issue_id: int) -> None:
    """After the last attempt: ``lease_held`` if a lease is in the way, else the cap."""
    if (winner := unreleased_lease(issue_id)) is not None:
        raise lease_held(winner)


def record_denial(
    *, workspace: Workspace, issue: Issue, session: AgentSession | None, agent: Agent, limit: int
) -> WipCapDenial:
    """The append-only record of a claim the WIP cap refused (invariants 3 (the WIP cap) and 8
    (append-only logs)), and its ``wip.denied`` event. Call it inside ``events.change()``."""
    earlier_by = logs.recording_offset()
    denial = WipCapDenial.objects.create(
        workspace=workspace,
        project_id=issue.project_id,
        issue=issue,
        session=session,
        agent=agent,
        limit=limit,
        **({} if earlier_by is None else {"occurred_at": DbNow() - earlier_by}),
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
    """Explicit release by the holding session: one compare-and-set statement and its
    event, the lease coming back from the UPDATE. The issue and session are looked up
    only when nothing was released, to tell which refusal it is.

    With ``fence``, only the unreleased lease of that fence is released: a lease
    reclaimed meanwhile (released ``expired`` by another claimer) no longer matches,
    so a holder that lost it while paused gets ``stale_fence`` and changes nothing. On
    PostgreSQL the UPDATE and a reclaim's UPDATE of the same row queue on its row
    lock, and the second re-checks ``released_at IS NULL`` on the row the first
    committed: exactly one wins.
    """
    with events.change():
        released = release_leases(
            reason=ReleaseReason.RELEASED,
            workspace_id=workspace.pk,
            issue_id=issue_id,
            session_id=session_id,
            fence=fence,
        )
        if not released:
            issue = lookups.get_issue(workspace, issue_id)
            session = lookups.get_session(workspace, session_id)
            fences.check(fences.LeaseFence(issue.pk), fence)  # lost it: say so, not "not held"
            raise LeaseNotHeld(f"Session {session.pk} holds no lease on issue {issue.pk}.")
    return released[0]


def release_leases(
    *,
    reason: str,
    by: dict[str, Any] | None = None,
    workspace_id: int | None = None,
    lease_id: int | None = None,
    issue_id: int | None = None,
    session_id: int | None = None,
    fence: int | None = None,
) -> list[IssueLease]:
    """Release the unreleased leases matching every filter given with ``reason``, in
    one compare-and-set statement, and announce each (``lease.released``, ``by``: who
    took it). Returns them as ``selectors.claims.leases`` shows them (released: not live),
    with their agents. Call it inside ``events.change()``.

    Announced in lease id order: the rows of an ``UPDATE … RETURNING`` come back in
    whatever order the database updated them, and the event log should read the same
    on every run and both databases (invariant 12 (one event per change))."""
    statement = sql.release_leases(
        dialect(),
        reason=reason,
        workspace_id=workspace_id,
        lease_id=lease_id,
        issue_id=issue_id,
        session_id=session_id,
        fence=fence,
    )
    released = []
    for row in fetchall(statement):
        lease, at = take(IssueLease, row, 0)
        assert lease is not None
        lease.is_live = False  # type: ignore[attr-defined]
        lease.agent, _ = take(Agent, row, at + 1)
        released.append((lease, row[at]))
    released.sort(key=lambda pair: pair[0].pk)
    for lease, project_id in released:
        events.lease_released(lease, reason=reason, project_id=project_id, by=by)
    return [lease for lease, _ in released]


def refresh_ages_out_at(*, project: Project) -> int:
    """The project's age cap changed: its unreleased leases age out by the new one."""
    cap = project.max_lease_age_seconds
    return execute(sql.refresh_ages_out_at(dialect(), project_id=project.pk, cap=cap))


def release_session_leases(*, session: AgentSession, reason: str) -> int:
    return len(release_leases(reason=reason, session_id=session.pk))


def release_issue_leases(*, issue: Issue, reason: str) -> int:
    return len(release_leases(reason=reason, issue_id=issue.pk))
