"""API keys: the mint body, the list query, and the key as shown (never its hash; the
raw key once, in the answer that minted it)."""

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from coordination.api.reference import examples as x
from coordination.api.serializers.fields import StrictBooleanField, StrictCharField
from coordination.models import ApiKey


@extend_schema_serializer(
    examples=[
        x.sent("an agent key for a day", x.NEW_KEY),
        x.sent("a dashboard's read key", {"name": "dashboard", "kind": "read"}),
    ]
)
class KeyInput(serializers.Serializer):
    name = StrictCharField(max_length=100, allow_blank=True, help_text="A label for the key.")
    kind = serializers.ChoiceField(
        choices=ApiKey.Kind.choices,
        default=ApiKey.Kind.FLEET,
        help_text="fleet: any agent; agent: one agent; read: reads only.",
    )
    agent = StrictCharField(
        max_length=100,
        required=False,
        help_text="The agent an agent key acts as (created if new); required for `agent`.",
    )
    can_force = StrictBooleanField(
        required=False, help_text="May force file claims: default true for fleet, else false."
    )
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="A future time; from then on the key is 401."
    )


@extend_schema_serializer(examples=[x.shown("an agent's key", x.KEY)])
class KeySerializer(serializers.ModelSerializer):
    prefix = serializers.CharField(source="key_prefix")
    agent = serializers.CharField(source="agent.name", allow_null=True)
    workspace = serializers.CharField(source="workspace.slug")

    class Meta:
        model = ApiKey
        fields = [
            "id",
            "name",
            "prefix",
            "kind",
            "agent",
            "can_force",
            "workspace",
            "created_at",
            "expires_at",
            "revoked_at",
        ]


@extend_schema_serializer(examples=[x.shown("minted: the raw key, this once", x.CREATED_KEY)])
class CreatedKeySerializer(KeySerializer):
    """A key as minted: the raw key is in this answer only (only its hash is stored)."""

    key = serializers.CharField(source="raw")

    class Meta(KeySerializer.Meta):
        fields = [*KeySerializer.Meta.fields, "key"]


@extend_schema_serializer(examples=[x.shown("this agent's key", x.MY_KEY)])
class MyKeySerializer(KeySerializer):
    """The caller's own key, and its workspace's name."""

    workspace_name = serializers.CharField(source="workspace.name")

    class Meta(KeySerializer.Meta):
        fields = [*KeySerializer.Meta.fields, "workspace_name"]
