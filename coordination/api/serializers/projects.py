"""Projects: the create/update body and the project as shown."""

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from coordination.api.reference import examples as x
from coordination.api.serializers.fields import SlugRefField, StrictCharField
from coordination.models import Project


@extend_schema_serializer(
    examples=[
        x.sent(
            "core",
            {
                "key": "core",
                "name": "Core services",
                "agent_wip_limit": 3,
                "primary_worktree": "wt-main",
            },
        )
    ]
)
class ProjectInput(serializers.Serializer):
    key = serializers.SlugField(max_length=32)
    name = StrictCharField(max_length=200)
    agent_wip_limit = serializers.IntegerField(
        min_value=1,
        max_value=100_000,
        required=False,
        help_text="The most live leases its issues may have at once (default 3, "
        "invariant 3 (the WIP cap)).",
    )
    max_lease_age_seconds = serializers.IntegerField(
        min_value=1,
        required=False,
        allow_null=True,
        help_text="The age cap of a lease, in seconds from its grant: past it the lease is "
        "not live whatever its holder's heartbeats, and the next claimer releases it "
        "`max_age` (invariant 17 (stalled is derived)). Null (the default): no cap.",
    )
    primary_worktree = SlugRefField(
        required=False,
        allow_null=True,
        help_text="A worktree's slug: where its runs lock when nothing nearer names one.",
    )


@extend_schema_serializer(examples=[x.shown("core", x.PROJECT)])
class ProjectSerializer(serializers.ModelSerializer):
    primary_worktree = serializers.CharField(
        source="primary_worktree.slug", read_only=True, allow_null=True
    )

    class Meta:
        model = Project
        fields = [
            "id",
            "key",
            "name",
            "agent_wip_limit",
            "max_lease_age_seconds",
            "primary_worktree",
            "created_at",
        ]
