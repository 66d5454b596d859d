"""Webhooks: the create/update body, the webhook as shown, and its deliveries."""

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from coordination.api.reference import examples as x
from coordination.api.serializers.fields import StrictBooleanField, StrictCharField
from coordination.models import EventType, Webhook, WebhookDelivery


@extend_schema_serializer(
    examples=[
        x.sent("lease and claim releases", x.NEW_WEBHOOK),
        x.sent("everything, with my secret", {"url": x.WEBHOOK["url"], "secret": "s3cret-" * 4}),
    ]
)
class WebhookInput(serializers.Serializer):
    url = StrictCharField(
        max_length=2000,
        help_text="An http:// or https:// URL at a public address (unless "
        "PROJEKTOR_WEBHOOK_ALLOW_PRIVATE=true).",
    )
    types = serializers.ListField(
        child=serializers.ChoiceField(choices=EventType.choices),
        required=False,
        max_length=len(EventType.choices),
        help_text="The event types to send; empty or omitted: every type.",
    )
    secret = StrictCharField(
        required=False,
        min_length=16,
        max_length=200,
        help_text="Keys the X-Projektor-Signature HMAC (generated when omitted).",
    )
    active = StrictBooleanField(required=False, help_text="Default true.")

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:  # a misspelt field is refused, never ignored
                raise serializers.ValidationError(
                    {name: ["Not a field of a webhook."] for name in unknown}
                )
        return super().to_internal_value(data)


@extend_schema_serializer(examples=[x.shown("releases to CI", x.WEBHOOK)])
class WebhookSerializer(serializers.ModelSerializer):
    """A webhook as shown: never its secret (only the answer that created it has it)."""

    types = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = Webhook
        fields = ["id", "url", "types", "active", "deactivated_reason", "created_at"]


@extend_schema_serializer(examples=[x.shown("created: its secret, this once", x.CREATED_WEBHOOK)])
class CreatedWebhookSerializer(WebhookSerializer):
    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]


@extend_schema_serializer(
    examples=[x.shown("retrying", x.DELIVERY), x.shown("delivered", x.DELIVERED)]
)
class WebhookDeliverySerializer(serializers.ModelSerializer):
    event = serializers.IntegerField(source="event_id", read_only=True)
    type = serializers.SerializerMethodField(help_text="The event's type (null: pruned).")

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "event",
            "type",
            "state",
            "attempts",
            "last_status",
            "last_error",
            "next_attempt_at",
            "delivered_at",
            "created_at",
        ]

    def get_type(self, delivery: WebhookDelivery) -> str | None:
        return getattr(delivery, "event_type", None)


class DeliveryQuery(serializers.Serializer):
    state = serializers.ChoiceField(
        choices=WebhookDelivery.State.choices, required=False, help_text="Only these."
    )
    page = serializers.IntegerField(required=False, min_value=1)
