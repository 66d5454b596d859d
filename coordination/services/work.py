"""start_work and finish_work: a unit of work in one call each [start_work, finish_work].

``start_work`` registers a session, takes the issue's lease, claims the paths, moves
a ``todo`` issue to ``in_progress``, makes the agent its assignee if it has none (or
takes the issue over from a dead session: ``takeover.take_over``) and says so on the
issue: all or nothing. The
steps run in one transaction, so a refusal at any step rolls every step back: no
session, no lease, no claim is left.
The logs are the exception, as always: a WIP-cap refusal or a file conflict is
recorded even though the request failed. The lease claim and the file claim are
steps that return their refusal instead of logging it (``leases.claim_or_capped``,
``file_claims.claim_or_refusal``); ``start_work`` rolls every step back, then writes
the refusal's rows once, for the agent (the session never came to be, so they name
none). ``session_not_live`` cannot happen: the session is created, heartbeat and
all, in the same transaction. The paths are checked and normalised once, at the
entrance (``NormalisedPaths``), and passed down as they are.

``finish_work`` moves the issue, releases the session's file claims on it and the
lease (``released``), and ends the session (anything else it holds:
``agent_ended``), in one transaction.
"""

from dataclasses import dataclass

from coordination.errors import CoordinationError, LeaseNotHeld
from coordination.models import (
    Agent,
    AgentSession,
    ApiKey,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    ReleaseReason,
    Workspace,
)
from coordination.paths import NormalisedPaths
from coordination.selectors import lookups
from coordination.services import (
    agents,
    events,
    fences,
    file_claims,
    graph,
    leases,
    messages,
    takeover,
    workflow,
)


@dataclass(frozen=True)
class Started:
    session: AgentSession
    lease: IssueLease
    claims: list[FileClaim]
    message: Message


@dataclass(frozen=True)
class Finished:
    issue: Issue
    released: list[str]
    session: AgentSession


class _RolledBack(Exception):
    """A step of ``start_work`` refused: leave its transaction (rolling every step back)
    carrying the refusal, whose own log is written once, after."""

    def __init__(self, refusal: leases.Capped | file_claims.Refusal) -> None:
        super().__init__()
        self.refusal = refusal


def start_work(
    *,
    workspace: Workspace,
    agent_name: str,
    issue_id: int,
    paths: list[str] | None = None,
    role: str | None = None,
    department: str | None = None,
    worktree_slug: str | None = None,
    api_key: ApiKey | None = None,
) -> Started:
    """``api_key`` opened the session (invariant 13 (the key is the actor)). A blocked issue is
    refused before anything starts; without ``paths``, the issue's expected paths are claimed
    (invariant 16 (the work graph))."""
    issue = lookups.get_issue(workspace, issue_id)
    graph.check_not_blocked(issue)  # before any claim: blocked, not a file conflict
    if paths is None:
        paths = graph.expected_paths(issue)
    # Checked and normalised once, here: a bad path is a 400 before anything starts.
    wanted = NormalisedPaths.of(paths) if paths else None
    # The identity outlives a failed start (it is who the logs name); its session not.
    agent, _ = Agent.objects.get_or_create(workspace=workspace, name=agent_name)
    try:
        with events.change():
            session = agents.register_session(
                workspace=workspace,
                agent_name=agent_name,
                role=role,
                department=department,
                worktree_slug=worktree_slug,
                api_key=api_key,
            )
            claimed = leases.claim_or_capped(
                workspace=workspace, issue_id=issue.pk, session_id=session.pk, assign=False
            )
            if isinstance(claimed, leases.Capped):
                raise _RolledBack(claimed)
            claims: list[FileClaim] = []
            if wanted is not None:
                outcome = file_claims.claim_or_refusal(
                    workspace=workspace, issue_id=issue.pk, paths=wanted, session_id=session.pk
                )
                if isinstance(outcome, file_claims.Refusal):
                    raise _RolledBack(outcome)
                claims = outcome.claims
            if issue.status == Issue.Status.TODO:  # the work has started: say so on the board
                workflow.transition_issue(
                    workspace=workspace,
                    issue_id=issue.pk,
                    to=Issue.Status.IN_PROGRESS,
                    by_human=False,
                    session=session,
                )
            # After the file claims, as the transition: the issue's row lock comes last,
            # then a dead predecessor's remaining claims (locking).
            takeover.take_over(
                workspace_id=workspace.pk,
                session=session,
                lease=claimed.lease,
                taken_over=claimed.taken_over,
            )
            message = messages.record_message(
                workspace=workspace,
                scope=messages.issue_scope(issue.pk),
                body=f"{agent_name} started work on issue {issue.pk}.",
                session=session,
            )
    except _RolledBack as rolled_back:
        error = refused(workspace=workspace, issue=issue, agent=agent, refusal=rolled_back.refusal)
        raise error from None
    return Started(session=session, lease=claimed.lease, claims=claims, message=message)


def refused(
    *,
    workspace: Workspace,
    issue: Issue,
    agent: Agent,
    refusal: leases.Capped | file_claims.Refusal,
) -> CoordinationError:
    """Write a refused start's own log, once, after its rollback, naming the agent and no
    session (it never came to be): the WIP cap's denial (invariant 3 (the WIP cap)), or one
    conflict row per (path, holder) and ``claims.refused`` (invariant 5 (all-or-nothing));
    return its 409."""
    with events.change():
        if isinstance(refusal, leases.Capped):
            leases.record_denial(
                workspace=workspace, issue=issue, session=None, agent=agent, limit=refusal.limit
            )
        else:
            file_claims.log_refusal(
                workspace=workspace, issue=issue, session=None, agent=agent, refusal=refusal
            )
    return refusal.error()


def finish_work(
    *,
    workspace: Workspace,
    session_id: int,
    issue_id: int,
    to: str = Issue.Status.IN_REVIEW,
    report: dict[str, str] | None = None,
    fence: int | None = None,
) -> Finished:
    """With ``fence`` (the fence of the issue's lease), only while that lease is the
    issue's unreleased one: otherwise ``stale_fence`` and nothing changes."""
    issue = lookups.get_issue(workspace, issue_id)
    session = lookups.get_session(workspace, session_id)
    held = IssueLease.objects.unreleased().filter(issue=issue, session=session)
    if fence is not None:
        fences.check(fences.LeaseFence(issue.pk), fence)  # lost it: say so, not "not held"
        held = held.filter(fence=fence)
    if not held.exists():
        raise LeaseNotHeld(f"Session {session.pk} holds no lease on issue {issue.pk}.")
    held_paths = sorted(
        FileClaim.objects.filter(
            issue=issue, session=session, released_at__isnull=True
        ).values_list("path", flat=True)
    )
    with events.change():
        if fence is not None:
            # Checked again under the issue's row lock (taken first, as the transition
            # below takes it): a claimer reclaims only while holding the issue FOR
            # SHARE, so the lease cannot change hands until this commits, and a close
            # cannot have released it before the check.
            lookups.get_issue(workspace, issue.pk, for_update=True)
            fences.check(fences.LeaseFence(issue.pk), fence)
        # The issue first (the order a close takes: issue, then its claims), so a
        # claimer holding the issue FOR SHARE and waiting on a claim cannot deadlock us.
        moved = workflow.transition_issue(
            workspace=workspace,
            issue_id=issue.pk,
            to=to,
            by_human=False,
            report=report,
            session=session,
        )
        # A close has released them already (issue_closed); otherwise release them now.
        file_claims.release_claims(
            reason=ReleaseReason.RELEASED,
            workspace_id=workspace.pk,
            issue_id=issue.pk,
            session_id=session.pk,
        )
        # Compare-and-set: a lease reclaimed meanwhile undoes the whole finish.
        released = leases.release_leases(
            reason=ReleaseReason.RELEASED,
            issue_id=issue.pk,
            session_id=session.pk,
            fence=fence,
        )
        if not released and to not in Issue.CLOSED_STATUSES:
            fences.check(fences.LeaseFence(issue.pk), fence, matched=False)
            raise LeaseNotHeld(f"Session {session.pk} no longer holds issue {issue.pk}.")
        ended = agents.end_session(workspace=workspace, session_id=session.pk, handed_in=True)
    return Finished(issue=moved, released=held_paths, session=ended)
