"""Issue leases and the WIP-cap denials of the claims the cap refused."""

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from coordination.api.reference import examples as x
from coordination.api.serializers.base import FieldsBoundOnce
from coordination.api.serializers.fields import FenceField, ReleaseReasonField
from coordination.api.serializers.sessions import SessionRefInput
from coordination.models import IssueLease, WipCapDenial


class LeaseReleaseInput(SessionRefInput):
    fence = FenceField(help_text="The lease's fence: release only while it is current.")


@extend_schema_serializer(examples=[x.shown("a live lease", x.LEASE)])
class LeaseSerializer(FieldsBoundOnce, serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.name", read_only=True, allow_null=True)
    live = serializers.BooleanField(source="is_live")
    # Unreleased and past its project's age cap (invariant 17 (stalled is derived)); a row read
    # without the annotation (a lease just granted or released) is not.
    aged_out = serializers.BooleanField(read_only=True, default=False)
    release_reason = ReleaseReasonField()
    fence = serializers.IntegerField(read_only=True)

    class Meta:
        model = IssueLease
        fields = [
            "id",
            "issue",
            "session",
            "agent",
            "acquired_at",
            "released_at",
            "release_reason",
            "live",
            "aged_out",
            "fence",
        ]


@extend_schema_serializer(examples=[x.shown("a denial", x.WIP_CAP_DENIAL)])
class WipCapDenialSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.key", read_only=True, allow_null=True)
    agent = serializers.CharField(source="agent.name", read_only=True, allow_null=True)

    class Meta:
        model = WipCapDenial
        fields = ["id", "project", "issue", "session", "agent", "limit", "occurred_at"]
