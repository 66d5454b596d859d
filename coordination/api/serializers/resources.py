"""Resources and their holds (docs/api.md, "Resources")."""

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from coordination.api.reference import examples as x
from coordination.api.serializers.fields import (
    FenceField,
    IdField,
    ReleaseReasonField,
    StrictCharField,
    StrictIntegerField,
)
from coordination.models import Resource, ResourceHold
from coordination.models.resources import MAX_CAPACITY
from coordination.selectors import resources as selected
from coordination.services.resources import MAX_WAIT_SECONDS


@extend_schema_serializer(
    examples=[
        x.sent(
            "two test databases",
            {"name": "db:test", "capacity": 2, "description": "test_0 and test_1"},
        )
    ]
)
class ResourceInput(serializers.Serializer):
    # The name's pattern and the capacity's range are the service's, for every caller.
    name = StrictCharField(max_length=200, help_text="`^[a-z0-9][a-z0-9._:-]{0,63}$`")
    capacity = StrictIntegerField(
        required=False, default=1, help_text=f"Units, 1 to {MAX_CAPACITY} (default 1)."
    )
    description = StrictCharField(
        required=False, default="", allow_blank=True, max_length=2000, trim_whitespace=False
    )


@extend_schema_serializer(examples=[x.sent("a third database", {"capacity": 3})])
class ResourceChangeInput(serializers.Serializer):
    capacity = StrictIntegerField(required=False, help_text=f"Units, 1 to {MAX_CAPACITY}.")
    description = StrictCharField(
        required=False, allow_blank=True, max_length=2000, trim_whitespace=False
    )


@extend_schema_serializer(
    examples=[
        x.sent(
            "one unit, waiting up to 30 s",
            {"session": x.SESSION_ID, "units": 1, "issue": x.ISSUE_ID, "wait": 30},
        )
    ]
)
class AcquireInput(serializers.Serializer):
    session = IdField(help_text="The acquiring session: live, of this workspace.")
    units = StrictIntegerField(
        required=False, default=1, min_value=1, help_text="1 to the capacity (default 1)."
    )
    issue = IdField(required=False, allow_null=True, help_text="The issue the hold serves.")
    wait = serializers.FloatField(
        required=False,
        default=0,
        min_value=0,
        max_value=MAX_WAIT_SECONDS,
        help_text=f"Seconds to wait in line for the units, 0 to {MAX_WAIT_SECONDS} (default 0).",
    )


@extend_schema_serializer(examples=[x.sent("fenced", {"session": x.SESSION_ID, "fence": 9})])
class HoldReleaseInput(serializers.Serializer):
    session = IdField(help_text="The holding session.")
    fence = FenceField(help_text="The hold's fence: release only while it is current.")


@extend_schema_serializer(
    examples=[x.shown("a live hold", x.HOLD), x.shown("a released hold", x.RELEASED_HOLD)]
)
class HoldSerializer(serializers.ModelSerializer):
    resource = serializers.CharField(source="resource.name", read_only=True)
    agent = serializers.CharField(source="agent.name", read_only=True, allow_null=True)
    live = serializers.BooleanField(source="is_live", read_only=True)
    release_reason = ReleaseReasonField()
    fence = serializers.IntegerField(read_only=True)
    slots = serializers.ListField(child=serializers.IntegerField(), read_only=True)

    class Meta:
        model = ResourceHold
        fields = [
            "id",
            "resource",
            "session",
            "agent",
            "issue",
            "units",
            "slots",
            "acquired_at",
            "released_at",
            "release_reason",
            "live",
            "fence",
        ]

    def to_representation(self, instance: ResourceHold) -> dict[str, Any]:
        # The fields above, written out once for every place that shows a hold: this
        # answer, the holders of a resource, of a 409 resource_busy and of its event.
        return selected.shown_hold(instance)


@extend_schema_serializer(examples=[x.shown("one of two in use", x.RESOURCE)])
class ResourceSerializer(serializers.ModelSerializer):
    in_use = serializers.SerializerMethodField()
    available = serializers.SerializerMethodField()
    waiting = serializers.IntegerField(read_only=True, default=0)
    holders = HoldSerializer(source="live_holds", many=True, read_only=True, default=list)

    class Meta:
        model = Resource
        fields = [
            "id",
            "name",
            "capacity",
            "description",
            "in_use",
            "available",
            "waiting",
            "holders",
        ]

    def get_in_use(self, resource: Resource) -> int:
        return selected.in_use(resource)

    def get_available(self, resource: Resource) -> int:
        return selected.available(resource)
