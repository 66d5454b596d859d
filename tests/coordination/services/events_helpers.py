"""The event log as its tests read it: a mark before a change (the newest event id),
the events after it as the API shows them (``EventSerializer``, without id and time),
and the event a test expects, in the fields of docs/api.md "Events"."""

from typing import Any

from django.db.models import Max

from coordination.api.serializers.events import EventSerializer
from coordination.models import AgentSession, Event, Issue, IssueLease

REPORT = {"summary": "Done.", "verification": "Tests pass."}


def cursor() -> int:
    """The newest event id so far: the test's mark before the change it checks."""
    return Event.objects.aggregate(newest=Max("id"))["newest"] or 0


def shown(event: Event) -> dict[str, Any]:
    body = dict(EventSerializer(event).data)
    del body["id"], body["occurred_at"]
    return body


def since(mark: int, *types: str) -> list[dict[str, Any]]:
    """The events after ``mark`` as the API shows them, in id order (only ``types``)."""
    rows = Event.objects.filter(id__gt=mark).order_by("id")
    if types:
        rows = rows.filter(type__in=types)
    return [shown(event) for event in rows]


def types_since(mark: int) -> list[str]:
    return list(Event.objects.filter(id__gt=mark).order_by("id").values_list("type", flat=True))


def expected(
    type: str,
    *,
    project: str | None = None,
    issue: int | None = None,
    session: AgentSession | None = None,
    agent: str | None = None,
    data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "type": type,
        "project": project,
        "issue": issue,
        "session": session.pk if session is not None else None,
        "agent": agent if agent is not None else (session.agent.name if session else None),
        "data": data or {},
    }


def by(session: AgentSession) -> dict[str, Any]:
    return {"session": session.pk, "agent": session.agent.name}


def lease_of(issue: Issue, session: AgentSession) -> IssueLease:
    return IssueLease.objects.filter(issue=issue, session=session).latest("id")
