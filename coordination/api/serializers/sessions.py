"""Sessions: the register body, a session reference, and the session as shown."""

from rest_framework import serializers

from coordination.api.serializers.base import FieldsBoundOnce
from coordination.api.serializers.fields import IdField, SlugRefField, StrictCharField
from coordination.models import AgentSession


class SessionRegisterInput(serializers.Serializer):
    agent = StrictCharField(max_length=100)
    role = StrictCharField(max_length=100, required=False, allow_blank=True)
    department = StrictCharField(max_length=100, required=False, allow_blank=True)
    worktree = SlugRefField(required=False)


class SessionRefInput(serializers.Serializer):
    session = IdField()


class SessionSerializer(FieldsBoundOnce, serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.name")
    role = serializers.CharField(source="agent.role")
    department = serializers.CharField(source="agent.department")
    worktree = serializers.CharField(source="agent.worktree.slug", read_only=True, allow_null=True)
    live = serializers.BooleanField(source="is_live")

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
            "ended_at",
        ]
