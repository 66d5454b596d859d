"""Sessions: the register body, a session reference, and the session as shown."""

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from coordination.api.reference import examples as x
from coordination.api.serializers.base import FieldsBoundOnce, SharedInputFields
from coordination.api.serializers.fields import (
    IdField,
    SlugRefField,
    StrictCharField,
    iso_datetime,
)
from coordination.models import AgentSession


@extend_schema_serializer(
    examples=[
        x.sent(
            "coder-1",
            {
                "agent": "coder-1",
                "role": "backend",
                "department": "payments",
                "worktree": "wt-main",
            },
        )
    ]
)
class SessionRegisterInput(SharedInputFields, serializers.Serializer):
    agent = StrictCharField(
        max_length=100,
        required=False,
        help_text="The agent's name: created on first use, reused after. Required with a "
        "fleet key; with an agent key, its agent's (omit it, or give that name).",
    )
    role = StrictCharField(
        max_length=100, required=False, allow_blank=True, help_text="Updates the agent's."
    )
    department = StrictCharField(
        max_length=100, required=False, allow_blank=True, help_text="Updates the agent's."
    )
    worktree = SlugRefField(required=False, help_text="A worktree's slug: binds the agent to it.")


@extend_schema_serializer(examples=[x.sent("a note", {"note": "tests pass locally"})])
class ProgressInput(SharedInputFields, serializers.Serializer):
    note = StrictCharField(
        max_length=500,
        required=False,
        allow_blank=True,
        help_text="What moved, in a line: shown on the agent's page.",
    )


@extend_schema_serializer(examples=[x.sent("session 12", {"session": x.SESSION_ID})])
class SessionRefInput(SharedInputFields, serializers.Serializer):
    session = IdField(help_text="The session's id, from POST /sessions/ or /work/start/.")


@extend_schema_serializer(examples=[x.shown("a live session", x.SESSION)])
class SessionSerializer(FieldsBoundOnce, serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.name")
    role = serializers.CharField(source="agent.role")
    department = serializers.CharField(source="agent.department")
    worktree = serializers.CharField(source="agent.worktree.slug", read_only=True, allow_null=True)
    live = serializers.BooleanField(source="is_live")
    # Live, and no progress for PROJEKTOR_STALL_AFTER_SECONDS (invariant 17 (stalled is derived)).
    stalled = serializers.BooleanField(source="is_stalled")
    # The session TTL, so that a client knows how often to heartbeat (a quarter of it).
    ttl_seconds = serializers.SerializerMethodField()

    class Meta:
        model = AgentSession
        fields = [
            "id",
            "agent",
            "role",
            "department",
            "worktree",
            "status",
            "live",
            "started_at",
            "last_heartbeat_at",
            "last_progress_at",
            "stalled",
            "progress_note",
            "ended_at",
            "ttl_seconds",
        ]

    def get_ttl_seconds(self, session: AgentSession) -> int:
        return int(settings.PROJEKTOR_SESSION_TTL_SECONDS)

    def to_representation(self, instance: AgentSession) -> dict[str, Any]:
        # The mapping the fields above render, written out (tests/coordination/api/
        # serializers/test_session_rendering.py holds it to DRF's): every heartbeat
        # answers with it, and fourteen field lookups were a third of that answer.
        agent = instance.agent
        worktree = agent.worktree
        return {
            "id": instance.pk,
            "agent": agent.name,
            "role": agent.role,
            "department": agent.department,
            "worktree": worktree.slug if worktree is not None else None,
            "status": instance.status,
            "live": boolean(instance.is_live),  # type: ignore[attr-defined]
            "started_at": iso_datetime(instance.started_at),
            "last_heartbeat_at": iso_datetime(instance.last_heartbeat_at),
            "last_progress_at": iso_datetime(instance.last_progress_at),
            "stalled": boolean(instance.is_stalled),  # type: ignore[attr-defined]
            "progress_note": instance.progress_note,
            "ended_at": iso_datetime(instance.ended_at),
            "ttl_seconds": self.get_ttl_seconds(instance),
        }


def boolean(value: Any) -> bool | None:
    """As DRF's BooleanField renders an annotation: a truth value, or null."""
    return None if value is None else bool(value)
