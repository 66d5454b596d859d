"""Events: the query of ``/events/`` and ``/events/stream/``, and an event as shown."""

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from coordination import feed
from coordination.api.auth import WORKSPACE_PARAM
from coordination.api.reference import examples as x
from coordination.api.serializers.fields import IdField, SlugRefField
from coordination.models import MAX_ID, Event, EventType


class EventQuery(serializers.Serializer):
    after = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=MAX_ID,
        help_text="The cursor: events with a greater id (default 0). Pass the `next` you got.",
    )  # fmt: skip
    type = serializers.CharField(
        required=False, max_length=1000,
        help_text="Comma-separated event types, e.g. `lease.released,claims.released`.",
    )  # fmt: skip
    project = SlugRefField(required=False, max_length=32, help_text="A project's key.")
    issue = IdField(required=False)
    agent = SlugRefField(required=False, help_text="An agent's name.")
    session = IdField(required=False)
    limit = serializers.IntegerField(
        required=False, default=100, min_value=1, max_value=feed.MAX_LIMIT,
        help_text="At most this many events (1-1000, default 100).",
    )  # fmt: skip
    wait = serializers.FloatField(
        required=False, default=0, min_value=0, max_value=feed.MAX_WAIT_SECONDS,
        help_text="Seconds (0-30) to hold the call while there is no event yet.",
    )  # fmt: skip

    def to_internal_value(self, data: Any) -> Any:
        # ``workspace`` names a person's workspace (``WorkspaceMember``), not a filter.
        unknown = sorted(set(data) - set(self.fields) - {WORKSPACE_PARAM})
        if unknown:  # a misspelt filter is refused, never ignored
            raise serializers.ValidationError(
                {name: ["Not a parameter of this call."] for name in unknown}
            )
        return super().to_internal_value(data)

    def validate_type(self, value: str) -> frozenset[str]:
        types = frozenset(part.strip() for part in value.split(",") if part.strip())
        unknown = sorted(types - set(EventType.values))
        if unknown or not types:
            raise serializers.ValidationError(
                f"Unknown event type: {', '.join(unknown) or value!r}. "
                f"Known: {', '.join(EventType.values)}."
            )
        return types


class StreamQuery(EventQuery):
    """The stream's query: the filters and the cursor (no page size, no wait)."""

    limit = None  # type: ignore[assignment]
    wait = None  # type: ignore[assignment]


@extend_schema_serializer(examples=[x.shown("a reclaimed lease", x.EVENT)])
class EventSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.key", read_only=True, allow_null=True)
    agent = serializers.CharField(source="agent.name", read_only=True, allow_null=True)
    session = serializers.IntegerField(source="session_id", read_only=True, allow_null=True)
    issue = serializers.IntegerField(source="issue_id", read_only=True, allow_null=True)

    class Meta:
        model = Event
        fields = ["id", "type", "occurred_at", "project", "issue", "session", "agent", "data"]


@extend_schema_serializer(examples=[x.shown("one event, then the cursor", x.EVENT_PAGE)])
class EventPageSerializer(serializers.Serializer):
    events = EventSerializer(many=True)
    next = serializers.IntegerField(help_text="The `after` to pass next time.")
    missed = serializers.BooleanField(
        help_text="True when events after `after` were already pruned (prune_events)."
    )
