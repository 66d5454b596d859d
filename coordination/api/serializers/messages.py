"""Messages: the post body and the message as shown."""

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from coordination.api.reference import examples as x
from coordination.api.serializers.base import SharedInputFields
from coordination.api.serializers.fields import IdField, StrictCharField
from coordination.models import Message


@extend_schema_serializer(
    examples=[
        x.sent(
            "to another agent",
            {
                "scope": "agent:coder-2",
                "body": "Issue 7 needs src/webhooks/retry.py: can you release it when done?",
                "session": x.SESSION_ID,
            },
        )
    ]
)
class MessageInput(SharedInputFields, serializers.Serializer):
    scope = StrictCharField(
        max_length=200, help_text="`issue:<id>`, `agent:<name>` or `project:<key>`."
    )
    # Length and content are checked by the service, for every caller alike.
    body = StrictCharField(trim_whitespace=False, help_text="1 to 10,000 characters.")
    session = IdField(required=False, allow_null=True, help_text="The sender's session.")


@extend_schema_serializer(examples=[x.shown("a note on issue 7", x.MESSAGE)])
class MessageSerializer(serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.name", read_only=True, allow_null=True)

    class Meta:
        model = Message
        fields = ["id", "scope", "body", "session", "agent", "created_at"]
