"""What an operator may do to the fleet from the admin, through the same rules as
the API: every change here releases with its proper reason, tells the issue's
readers, and reports what it did and what it could not do (and why).

Operators act on rows they selected, so each function takes a queryset and
returns an ``Outcome`` of sentences for the admin's message bar.
"""

from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from coordination import actors
from coordination.errors import CoordinationError, InvalidTransition
from coordination.liveness import stalled_q
from coordination.models import (
    AgentSession,
    ApiKey,
    FileClaim,
    Issue,
    IssueLease,
    ReleaseReason,
    Run,
    WorktreeLock,
)
from coordination.selectors import lookups
from coordination.services import agents, events, file_claims, messages, runs, workflow
from coordination.services.common import release_unreleased
from coordination.services.leases import release_leases


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def tell_issue(issue: Issue, body: str, *, operator: str) -> None:
    """Post to the issue, as the operator who changed it."""
    messages.record_message(
        workspace=issue.workspace,
        scope=messages.issue_scope(issue.pk),
        body=body,
        session=None,
        operator=operator,
    )


def by_operator(operator: str) -> dict[str, str | None]:
    """``by`` of an operator's force: no session or agent took it, a person did."""
    return {"session": None, "agent": None, "operator": operator}


def holder_name(row: IssueLease | FileClaim) -> str:
    agent = row.agent.name if row.agent is not None else "no agent"
    return f"{agent} (session {row.session_id})" if row.session_id else agent


def force_release_leases(*, leases: QuerySet[IssueLease], operator: str) -> Outcome:
    """Release each unreleased lease ``overridden`` and post it to the issue."""
    outcome = Outcome()
    for lease in leases.select_related("issue__workspace", "agent").order_by("pk"):
        with events.change():
            # Compare-and-set: a lease released meanwhile keeps its first reason.
            if not release_leases(
                reason=ReleaseReason.OVERRIDDEN,
                lease_id=lease.pk,
                by=by_operator(operator),
            ):
                outcome.refused.append(
                    f"lease {lease.pk} on issue {lease.issue_id}: already released"
                )
                continue
            tell_issue(
                lease.issue,
                f"{actors.operator(operator).at_sentence_start} force-released the lease of "
                f"{holder_name(lease)} on issue {lease.issue_id}.",
                operator=operator,
            )
        outcome.done.append(f"lease {lease.pk} on issue {lease.issue_id}")
    return outcome


def force_release_file_claims(*, claims: QuerySet[FileClaim], operator: str) -> Outcome:
    """Release the selected claims ``overridden``, issue by issue, through the
    path-ordered release the claimers also use, and post each issue what it lost."""
    outcome = Outcome()
    selected = claims.select_related("issue__workspace").order_by("issue_id", "path")
    already = [claim for claim in selected if claim.released_at is not None]
    outcome.refused += [
        f"{claim.path} (issue {claim.issue_id}): already released" for claim in already
    ]
    pending: dict[int, list[int]] = {}
    for claim in selected:
        if claim.released_at is None:
            pending.setdefault(claim.issue_id, []).append(claim.pk)
    issues = {claim.issue_id: claim.issue for claim in selected}
    for issue_id, pks in pending.items():
        issue = issues[issue_id]
        with events.change():
            released = file_claims.release_claims(
                reason=ReleaseReason.OVERRIDDEN,
                workspace_id=issue.workspace_id,
                ids=pks,
                by=by_operator(operator),
            )
            if released:
                tell_issue(
                    issue,
                    f"{actors.operator(operator).at_sentence_start} force-released file claims "
                    f"of issue {issue_id}: " + ", ".join(released) + ".",
                    operator=operator,
                )
        outcome.done += [f"{path} (issue {issue_id})" for path in released]
    return outcome


def force_release_worktree_locks(*, locks: QuerySet[WorktreeLock], operator: str) -> Outcome:
    """Release each lock ``overridden``; its run, if still running, ends ``cancelled``
    with the reason, instead of staying ``running`` without a lock."""
    outcome = Outcome()
    for lock in locks.select_related("worktree", "run__issue__workspace").order_by("pk"):
        name = f"lock on worktree {lock.worktree.slug}"
        by = actors.operator(operator).words
        reason = f"Worktree {lock.worktree.slug!r} was force-released by {by}."
        with events.change():
            # The run before its lock: the order finish_run takes them in (locking).
            cancelled = lock.run_id is not None and bool(
                runs.cancel_runs(Run.objects.filter(pk=lock.run_id), detail=reason)
            )
            if not release_unreleased(
                WorktreeLock.objects.filter(pk=lock.pk), ReleaseReason.OVERRIDDEN
            ):
                transaction.set_rollback(True)  # nothing to force: the run stays as it was
                outcome.refused.append(f"{name}: already released")
                continue
            if lock.run is not None:
                tell_issue(
                    lock.run.issue,
                    reason + (f" Run {lock.run_id} was cancelled." if cancelled else ""),
                    operator=operator,
                )
        outcome.done.append(name + (f" (run {lock.run_id} cancelled)" if cancelled else ""))
    return outcome


def end_sessions(*, sessions: QuerySet[AgentSession]) -> Outcome:
    """End each session cleanly: what it holds is released ``agent_ended``."""
    outcome = Outcome()
    for session in sessions.select_related("workspace", "agent").order_by("pk"):
        if session.status == AgentSession.Status.ENDED:
            outcome.refused.append(f"session {session.pk} ({session.agent.name}): already ended")
            continue
        agents.end_session(workspace=session.workspace, session_id=session.pk)
        outcome.done.append(f"session {session.pk} ({session.agent.name})")
    return outcome


def end_stalled_sessions(*, sessions: QuerySet[AgentSession], operator: str) -> Outcome:
    """End each selected session that is stalled now (invariant 17 (stalled is derived)): what it
    holds is released ``agent_ended``, and its agent is told why in a message. A session that
    is not stalled (it moved, or is not live) is left alone and said so."""
    outcome = Outcome()
    stalled = set(sessions.filter(stalled_q()).values_list("pk", flat=True))
    for session in sessions.select_related("workspace", "agent").order_by("pk"):
        label = f"session {session.pk} ({session.agent.name})"
        if session.pk not in stalled:
            outcome.refused.append(f"{label}: not stalled")
            continue
        with events.change():
            held = list(
                IssueLease.objects.unreleased()
                .filter(session=session)
                .order_by("issue_id")
                .values_list("issue_id", flat=True)
            )
            agents.end_session(workspace=session.workspace, session_id=session.pk)
            holding = ", ".join(f"#{issue_id}" for issue_id in held) or "nothing"
            messages.record_message(
                workspace=session.workspace,
                scope=f"agent:{session.agent.name}",
                body=f"{actors.operator(operator).at_sentence_start} ended your session "
                f"{session.pk}: it made no progress since "
                f"{session.last_progress_at:%Y-%m-%d %H:%M} UTC. What it held ({holding}) "
                "was released agent_ended; register a new session to go on.",
                session=None,
                operator=operator,
            )
        outcome.done.append(label)
    return outcome


def transition_issues(*, issues: QuerySet[Issue], to: str, operator: str | None = None) -> Outcome:
    """Move each issue as a person would (the review gate passes; the event names
    ``operator``); each refusal says why (a transition the workflow forbids, a
    definition of ready not met)."""
    outcome = Outcome()
    for issue in issues.select_related("workspace").order_by("pk"):
        try:
            workflow.transition_issue(
                workspace=issue.workspace,
                issue_id=issue.pk,
                to=to,
                by_human=True,
                operator=operator,
            )
        except CoordinationError as error:
            outcome.refused.append(f"#{issue.pk}: {error.detail}")
        else:
            outcome.done.append(f"#{issue.pk}")
    return outcome


# Sent back from review to the ready queue, by the moves the workflow allows.
SEND_BACK = (Issue.Status.IN_PROGRESS, Issue.Status.TODO)


def send_back_issues(*, issues: QuerySet[Issue], note: str, operator: str) -> Outcome:
    """Return each issue in review to the queue (a runner takes it again), with the
    reviewer's ``note`` posted to it; all of it or, refused, none."""
    outcome = Outcome()
    for issue in issues.select_related("workspace").order_by("pk"):
        try:
            with events.change():
                # Locked and checked first: the workflow alone would also send back a
                # todo issue (todo → in_progress → todo).
                locked = lookups.get_issue(issue.workspace, issue.pk, for_update=True)
                if locked.status != Issue.Status.IN_REVIEW:
                    raise InvalidTransition(
                        f"Only an issue in review can be sent back; it is {locked.status}."
                    )
                for to in SEND_BACK:
                    workflow.transition_issue(
                        workspace=issue.workspace,
                        issue_id=issue.pk,
                        to=to,
                        by_human=True,
                        operator=operator,
                    )
                by = actors.operator(operator).words
                tell_issue(issue, f"Sent back by {by}: {note}", operator=operator)
        except CoordinationError as error:
            outcome.refused.append(f"#{issue.pk}: {error.detail}")
        else:
            outcome.done.append(f"#{issue.pk}")
    return outcome


def revoke_api_keys(*, keys: QuerySet[ApiKey]) -> Outcome:
    outcome = Outcome()
    for key in keys.order_by("pk"):
        if ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        ):
            outcome.done.append(str(key))
        else:
            outcome.refused.append(f"{key}: already revoked")
    return outcome
