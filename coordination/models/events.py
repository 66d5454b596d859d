"""The event log: one row per change of coordination state (invariant 12 (one event per change))."""

from __future__ import annotations

from typing import Any

from django.db import models

from coordination.liveness import DbNow
from coordination.models.tenancy import Workspace
from coordination.models.tracker import Agent, AgentSession, Issue, Project


class EventType(models.TextChoices):
    SESSION_REGISTERED = "session.registered"
    SESSION_ENDED = "session.ended"
    SESSION_STALLED = "session.stalled"
    LEASE_GRANTED = "lease.granted"
    LEASE_RELEASED = "lease.released"
    CLAIMS_GRANTED = "claims.granted"
    CLAIMS_RELEASED = "claims.released"
    CLAIMS_REFUSED = "claims.refused"
    WIP_DENIED = "wip.denied"
    ISSUE_CREATED = "issue.created"
    ISSUE_TRANSITIONED = "issue.transitioned"
    ISSUE_LINKED = "issue.linked"
    ISSUE_UNLINKED = "issue.unlinked"
    ISSUE_UNBLOCKED = "issue.unblocked"
    RUN_DISPATCHED = "run.dispatched"
    RUN_FINISHED = "run.finished"
    RUN_NOT_STARTED = "run.not_started"
    MESSAGE_POSTED = "message.posted"
    RESOURCE_ACQUIRED = "resource.acquired"
    RESOURCE_RELEASED = "resource.released"
    RESOURCE_REFUSED = "resource.refused"
    LANDING_QUEUED = "landing.queued"
    LANDING_TESTING = "landing.testing"
    LANDING_LANDED = "landing.landed"
    LANDING_REJECTED = "landing.rejected"


def reference(model: type[models.Model]) -> Any:
    """A link that is only an id in the log: no constraint, so writing an event takes
    no lock on the row it names (its KEY SHARE could meet a transition's row lock
    while the event's writer holds the log's lock: ``services.events``), and a
    deleted row leaves the event readable (its key or name then reads null)."""
    return models.ForeignKey(
        model,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )


class Event(models.Model):
    """What happened, in the order it committed (docs/api.md, Events). Written only by
    ``coordination.services.events``; ids of one workspace grow in commit order."""

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, db_constraint=False, related_name="+"
    )
    type = models.CharField(max_length=32, choices=EventType.choices)
    occurred_at = models.DateTimeField(db_default=DbNow(), editable=False)
    project = reference(Project)
    issue = reference(Issue)
    session = reference(AgentSession)
    agent = reference(Agent)
    data = models.JSONField(default=dict)

    class Meta:
        indexes = [
            # The cursor read: a workspace's events after an id, in id order.
            models.Index(fields=["workspace", "id"], name="event_cursor"),
            # An issue's timeline.
            models.Index(fields=["issue", "id"], name="event_issue"),
            # The resources' refusals per day (health page, /metrics): a few rows of a
            # large log, indexed alone so that no other write pays for it.
            models.Index(
                fields=["workspace", "occurred_at"],
                condition=models.Q(type="resource.refused"),
                name="event_resource_refusals",
            ),
        ]

    def __str__(self) -> str:
        return f"event {self.pk} {self.type}"
