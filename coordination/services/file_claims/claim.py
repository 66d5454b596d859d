"""Claiming files: all-or-nothing under concurrency (invariants 4, 5, 6, 8).

The guard is the partial unique index ``one_unreleased_claim_per_path``: a path can
never have two unreleased rows. Around it, ``claim_files`` runs one transaction per
attempt that locks the paths and their issues, then the holders' rows
(``coordination.services.locking`` gives the order and why it cannot deadlock), and
decides: refuse (write the conflict log, commit, then raise), or reclaim dead
holders, override (``force``) and insert the rest with ``ON CONFLICT DO NOTHING``.
An insert that returns no row means someone the locks do not cover got there first:
the whole attempt is rolled back and retried, a bounded number of times, and then
reported as a conflict — never a partial claim, never an ``IntegrityError``.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coordination.errors import (
    FileConflict,
    InvalidInput,
    InvalidTransition,
    NotFound,
    SessionNotLive,
)
from coordination.models import (
    Agent,
    AgentSession,
    EventType,
    FileClaim,
    Issue,
    ReleaseReason,
    Workspace,
)
from coordination.paths import MAX_PATHS, checked_paths
from coordination.selectors import Holder
from coordination.services import events, leases, locking, messages, sql
from coordination.services.common import release_if_holder_dead
from coordination.services.file_claims.release import release_claims
from coordination.services.rows import dialect, execute, fetchall, fetchone, instance, take

MAX_ATTEMPTS = 4


@dataclass(frozen=True)
class ClaimedFiles:
    claims: list[FileClaim]
    reclaimed: list[str]
    overridden: list[Holder]


@dataclass(frozen=True)
class LockedHolder:
    """An unreleased claim on a requested path, row-locked, and whether its holder
    session is live."""

    claim: FileClaim
    live: bool


@dataclass(frozen=True)
class _Refused:
    conflicts: list[Holder]


class _Raced(Exception):
    """Another transaction changed a requested path under this attempt; roll it back."""


# --- the statements of one attempt ------------------------------------------------------


def existing_issue(workspace: Workspace, issue_id: int) -> Issue:
    """The issue as read now, or 404: the claim path's lookup, in one statement."""
    row = fetchone(sql.workspace_issue(workspace_id=workspace.pk, issue_id=issue_id))
    if row is None:
        raise NotFound(f"Issue {issue_id} does not exist.")
    return instance(Issue, row)


def claimer_session(workspace: Workspace, session_id: int) -> AgentSession:
    """The claiming session with its agent, if it is live: else 400 (it is named in
    the body) or 409 ``session_not_live``."""
    row = fetchone(sql.claimer_session(dialect(), workspace_id=workspace.pk, session_id=session_id))
    if row is None:
        raise InvalidInput(f"Session {session_id} does not exist.")
    if not row[-1]:
        raise SessionNotLive(f"Session {session_id} is not live.")
    session, at = take(AgentSession, row, 0)
    agent, _ = take(Agent, row, at)
    assert session is not None and agent is not None
    session.agent = agent
    return session


def locked_holders(*, workspace: Workspace, paths: list[str]) -> list[LockedHolder]:
    """The unreleased claims on ``paths``, row-locked in path order, with their agent."""
    holders = []
    for row in fetchall(sql.locked_holders(dialect(), workspace_id=workspace.pk, paths=paths)):
        claim, at = take(FileClaim, row, 0)
        assert claim is not None
        claim.agent, _ = take(Agent, row, at)
        holders.append(LockedHolder(claim=claim, live=bool(row[-1])))
    return holders


def insert_claims(
    *, workspace_id: int, issue_id: int, session: AgentSession | None, paths: list[str]
) -> list[FileClaim]:
    """Insert one unreleased claim per path; return the new claims, in path order. A
    path someone else holds gives no row: the caller rolls everything back."""
    if not paths:
        return []
    statement = sql.insert_claims(
        dialect(),
        workspace_id=workspace_id,
        issue_id=issue_id,
        session_id=session.pk if session is not None else None,
        agent_id=session.agent_id if session is not None else None,
        paths=paths,
    )
    claims = [instance(FileClaim, row) for row in fetchall(statement)]
    for claim in claims:
        claim.agent = session.agent if session is not None else None
    return sorted(claims, key=lambda claim: claim.path)


def log_conflicts(
    *,
    workspace: Workspace,
    issue: Issue,
    session: AgentSession | None,
    holders: list[FileClaim],
    forced: bool,
    agent: Agent | None = None,
) -> None:
    """One append-only ``claim_conflicts`` row per contested path (invariant 8), in
    one INSERT. The rejected agent is the session's, or ``agent`` for a claimer
    without one."""
    if not holders:
        return
    rejected_agent_id = session.agent_id if session is not None else (agent.pk if agent else None)
    rows = [
        sql.ConflictRow(
            path=claim.path,
            rejected_issue_id=issue.pk,
            rejected_session_id=session.pk if session is not None else None,
            rejected_agent_id=rejected_agent_id,
            holding_issue_id=claim.issue_id,
            holding_session_id=claim.session_id,
            holding_agent_id=claim.agent_id,
        )
        for claim in holders
    ]
    execute(sql.insert_conflicts(dialect(), workspace_id=workspace.pk, rows=rows, forced=forced))


def announce_refusal(
    *,
    workspace: Workspace,
    issue: Issue,
    session: AgentSession | None,
    paths: list[str],
    conflicts: list[dict[str, Any]],
    agent: Agent | None = None,
) -> None:
    """``claims.refused``: the requested paths and the 409's conflict entries, written
    with the conflict rows (the refusal's own log)."""
    events.record(
        workspace.pk,
        EventType.CLAIMS_REFUSED,
        project_id=issue.project_id,
        issue_id=issue.pk,
        session_id=session.pk if session is not None else None,
        agent_id=session.agent_id if session is not None else (agent.pk if agent else None),
        data={"paths": paths, "conflicts": conflicts},
    )


def file_conflict(
    conflicts: list[Holder], *, requested: int, detail: str | None = None
) -> FileConflict:
    return FileConflict(
        detail
        or f"{len(conflicts)} of {requested} paths are claimed by other issues; "
        "nothing was claimed.",
        conflicts=[holder.as_dict() for holder in conflicts],
    )


def released_claims(claims: list[FileClaim]) -> list[sql.ReleasedClaim]:
    """The holders of reclaimed claims, with their issues' projects (for the event)."""
    projects = dict(
        Issue.objects.filter(pk__in={claim.issue_id for claim in claims}).values_list(
            "id", "project_id"
        )
    )
    return [
        sql.ReleasedClaim(
            path=claim.path,
            issue_id=claim.issue_id,
            session_id=claim.session_id,
            agent_id=claim.agent_id,
            project_id=projects.get(claim.issue_id),
        )
        for claim in claims
    ]


# --- claim --------------------------------------------------------------------------------


def claim_files(
    *,
    workspace: Workspace,
    issue_id: int,
    paths: Sequence[str],
    session_id: int | None = None,
    force: bool = False,
    fence: int | None = None,
) -> ClaimedFiles:
    """Claim every path for the issue, or none (invariants 4, 5, 6, 8).

    With ``fence`` (the fence of the issue's lease, docs/api.md "Fences"), the claim is
    made only while that lease is the issue's unreleased one: otherwise
    ``stale_fence``, and nothing is claimed or logged.

    - a path this issue already holds is kept (idempotent) and returned in claims;
    - a path whose holder session is not live is reclaimed ``expired``, no conflict;
    - a path held by another issue's live or session-less claim is a conflict: without
      ``force`` the request is refused (409 naming every holder) after its conflict
      rows commit; with ``force`` the holders are released ``overridden`` and a
      message to ``issue:<this issue>`` names the displaced issues.
    """
    issue = existing_issue(workspace, issue_id)
    wanted = checked_paths(paths, limit=MAX_PATHS)
    for _ in range(MAX_ATTEMPTS):
        try:
            outcome = _attempt(
                workspace=workspace,
                issue=issue,
                session_id=session_id,
                paths=wanted,
                force=force,
                fence=fence,
            )
        except _Raced:
            continue
        except locking.IssueLocked:  # see locking: a fenced claim met a close
            locking.wait_for_issue(issue.pk)
            continue
        if isinstance(outcome, _Refused):
            raise file_conflict(outcome.conflicts, requested=len(wanted))
        return outcome
    # Each retry follows a path that changed hands under us; after a few, the caller
    # gets the holders as they stand rather than an unbounded wait.
    current = (
        FileClaim.objects.unreleased()
        .filter(workspace=workspace, path__in=wanted)
        .exclude(issue=issue)
        .select_related("agent")
        .order_by("path")
    )
    raise file_conflict(
        [Holder.of(claim) for claim in current],
        requested=len(wanted),
        detail="The paths changed hands while they were claimed; nothing was claimed. Retry.",
    )


def _attempt(
    *,
    workspace: Workspace,
    issue: Issue,
    session_id: int | None,
    paths: list[str],
    force: bool,
    fence: int | None = None,
) -> ClaimedFiles | _Refused:
    with events.change():
        if fence is not None:
            # Lease, then issue, before the path locks (locking): a refusal has
            # written nothing, and the lease cannot be reclaimed under this claim.
            leases.check_lease_fence(issue_id=issue.pk, fence=fence)
        session = claimer_session(workspace, session_id) if session_id is not None else None
        # Read under the issue lock: closing releases the issue's claims, so a claim
        # admitted after it would outlive the close and block others until forced.
        status = locking.lock_paths_and_issues(
            workspace_id=workspace.pk, issue_id=issue.pk, paths=paths
        )
        if status in Issue.CLOSED_STATUSES:
            raise InvalidTransition(f"Issue {issue.pk} is {status}; reopen it to claim files.")
        kept: list[FileClaim] = []
        dead: list[FileClaim] = []
        contested: list[FileClaim] = []
        for holder in locked_holders(workspace=workspace, paths=paths):
            if holder.claim.session_id is not None and not holder.live:
                dead.append(holder.claim)
            elif holder.claim.issue_id == issue.pk:
                kept.append(holder.claim)
            else:
                contested.append(holder.claim)  # live, or session-less: held until forced
        log_conflicts(
            workspace=workspace, issue=issue, session=session, holders=contested, forced=force
        )
        holders = [Holder.of(claim) for claim in contested]
        if contested and not force:
            # Commit the conflict log only: dead holders are left for the next
            # successful claim, so a refusal changes nothing else (invariant 6).
            announce_refusal(
                workspace=workspace,
                issue=issue,
                session=session,
                paths=paths,
                conflicts=[holder.as_dict() for holder in holders],
            )
            return _Refused(conflicts=holders)
        taker = events.holder(session.pk, session.agent.name) if session is not None else None
        for claim in dead:
            if not release_if_holder_dead(claim, sessionless_is_dead=False):
                raise _Raced  # revived by a heartbeat since we looked
        if dead:
            events.claims_released(
                workspace.pk, released_claims(dead), reason=ReleaseReason.EXPIRED, by=taker
            )
        if contested:
            overridden = release_claims(
                reason=ReleaseReason.OVERRIDDEN,
                workspace_id=workspace.pk,
                ids=[claim.pk for claim in contested],
                by=taker,
            )
            if len(overridden) != len(contested):
                raise _Raced
            messages.announce_override(
                workspace=workspace,
                issue_id=issue.pk,
                session=session,
                taken=[(holder.path, holder.issue, holder.agent) for holder in holders],
            )
        kept_paths = {claim.path for claim in kept}
        fresh = [path for path in paths if path not in kept_paths]
        inserted = insert_claims(
            workspace_id=workspace.pk, issue_id=issue.pk, session=session, paths=fresh
        )
        if len(inserted) != len(fresh):
            raise _Raced  # a path was taken after our locks: roll back the whole attempt
        if inserted:
            events.record(
                workspace.pk,
                EventType.CLAIMS_GRANTED,
                project_id=issue.project_id,
                issue_id=issue.pk,
                session_id=session.pk if session is not None else None,
                agent_id=session.agent_id if session is not None else None,
                data={"paths": [claim.path for claim in inserted]},
            )
        return ClaimedFiles(
            claims=sorted(kept + inserted, key=lambda claim: claim.path),
            reclaimed=[claim.path for claim in dead],
            overridden=holders,
        )
