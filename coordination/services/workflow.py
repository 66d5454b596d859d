"""The issue workflow, defined once here and served as data by ``get_workflow``."""

from typing import Any

from coordination import actors
from coordination.errors import Forbidden, InvalidTransition
from coordination.models import (
    Agent,
    AgentSession,
    ApiKey,
    EventType,
    Issue,
    IssueLease,
    ReleaseReason,
    Workspace,
)
from coordination.selectors import lookups
from coordination.services import events, file_claims, graph, leases, messages

S = Issue.Status

TRANSITIONS: dict[str, tuple[str, ...]] = {
    S.BACKLOG: (S.TODO, S.CANCELLED),
    S.TODO: (S.BACKLOG, S.IN_PROGRESS, S.CANCELLED),
    S.IN_PROGRESS: (S.TODO, S.IN_REVIEW, S.CANCELLED),
    S.IN_REVIEW: (S.IN_PROGRESS, S.DONE, S.CANCELLED),
    S.DONE: (S.TODO,),
    S.CANCELLED: (S.BACKLOG,),
}

# A transition only a human (logged-in person or admin) may make; an API key may not.
HUMAN_GATES: frozenset[tuple[str, str]] = frozenset({(S.IN_REVIEW, S.DONE)})

# A report's limits keep its message within a message body's 10,000 characters.
REPORT_LIMITS = {"summary": 4000, "verification": 4000, "pr_link": 1000}

DEFINITION_OF_READY: dict[str, str] = {
    "title": "has a title",
    "description": "says what done means (a non-empty description)",
}


def missing_for_ready(issue: Issue) -> list[str]:
    """The definition-of-ready items ``issue`` lacks, checked on entering ``todo``."""
    return [field for field in DEFINITION_OF_READY if not str(getattr(issue, field)).strip()]


def missing_for_work(issue: Issue) -> list[str]:
    """What keeps an open issue out of the ready queue: the definition-of-ready
    items it lacks, and ``status`` unless it is in ``todo``."""
    missing = missing_for_ready(issue)
    return missing if issue.status == S.TODO else [*missing, "status"]


def get_workflow() -> dict[str, Any]:
    return {
        "states": [state.value for state in S],
        "transitions": [
            {"from": source, "to": target, "human_only": (source, target) in HUMAN_GATES}
            for source, targets in TRANSITIONS.items()
            for target in targets
        ],
        "definition_of_ready": [
            {"field": field, "rule": rule} for field, rule in DEFINITION_OF_READY.items()
        ],
        "gates": [
            {"from": source, "to": target, "requires": "human"} for source, target in HUMAN_GATES
        ],
        "report": {
            "required_for": sorted(Issue.REPORTED_STATUSES),
            "when": "the issue has ever been leased",
            "fields": {"summary": "required", "verification": "required", "pr_link": "optional"},
        },
    }


def check_ready(issue: Issue) -> None:
    missing = missing_for_ready(issue)
    if missing:
        raise InvalidTransition(
            f"Issue does not meet the definition of ready: missing {', '.join(missing)}.",
            missing=missing,
        )


def check_transition(issue: Issue, to: str, *, by_human: bool) -> None:
    if to not in TRANSITIONS.get(issue.status, ()):
        raise InvalidTransition(
            f"Cannot move an issue from {issue.status} to {to}.",
            allowed=list(TRANSITIONS.get(issue.status, ())),
        )
    if (issue.status, to) in HUMAN_GATES and not by_human:
        raise Forbidden(f"Only a person can move an issue from {issue.status} to {to}.")
    if to == S.TODO:
        check_ready(issue)


def check_report(issue: Issue, to: str, report: dict[str, str] | None) -> None:
    """Work that was ever leased enters review or done only with a completion report,
    given now or recorded earlier: what was done and how it was verified."""
    if (
        to in Issue.REPORTED_STATUSES
        and report is None
        and issue.report is None
        and IssueLease.objects.filter(issue=issue).exists()
    ):
        raise InvalidTransition(
            f"Issue {issue.pk} was worked on: entering {to} needs a completion report "
            '{"summary", "verification", "pr_link"?}.',
            missing=["report"],
        )


def report_message(report: dict[str, str]) -> str:
    lines = [
        "Completion report.",
        f"Summary: {report['summary']}",
        f"Verification: {report['verification']}",
    ]
    if report.get("pr_link"):
        lines.append(f"Pull request: {report['pr_link']}")
    return "\n".join(lines)


def transition_issue(
    *,
    workspace: Workspace,
    issue_id: int,
    to: str,
    by_human: bool,
    report: dict[str, str] | None = None,
    author: Agent | None = None,
    session: AgentSession | None = None,
    operator: str | None = None,
    key: ApiKey | None = None,
) -> Issue:
    """Move the issue; closing it releases its lease and file claims ``issue_closed``.

    The mover is ``session`` (start_work, finish_work) and its agent, else ``author``
    (an agent key's agent), else a person (``operator``, their username, when the
    page or the admin knows it), else ``key`` (a key that names no agent, by its
    name): the event names whichever it is (``coordination.actors``). A
    ``report`` is recorded on the issue and posted to it, signed by the mover;
    entering ``in_review`` or ``done`` needs one if the issue was ever leased
    (``missing: ["report"]``).
    """
    with events.change():
        issue = lookups.get_issue(workspace, issue_id, for_update=True)
        check_transition(issue, to, by_human=by_human)
        check_report(issue, to, report)
        events.record(
            workspace.pk,
            EventType.ISSUE_TRANSITIONED,
            project_id=issue.project_id,
            issue_id=issue.pk,
            session_id=session.pk if session is not None else None,
            agent_id=session.agent_id if session is not None else getattr(author, "pk", None),
            data={"from": issue.status, "to": to}
            | actors.recorded(
                agent_known=session is not None or author is not None, operator=operator, key=key
            ),
        )
        # Blocked; unblocked (invariant 16 (the work graph)).
        graph.on_transition(workspace, issue, to=to)
        issue.status = to
        changed = ["status", "updated_at"]
        if report is not None:
            issue.report = report
            changed.append("report")
        issue.save(update_fields=changed)
        if report is not None:
            messages.record_message(
                workspace=workspace,
                scope=messages.issue_scope(issue.pk),
                body=report_message(report),
                session=session,
                author=author,
                operator=operator,
                key=key,
            )
        if to in Issue.CLOSED_STATUSES:
            leases.release_issue_leases(issue=issue, reason=ReleaseReason.ISSUE_CLOSED)
            file_claims.release_issue_claims(issue=issue, reason=ReleaseReason.ISSUE_CLOSED)
    return issue
