"""Messages: the post body and the message as shown."""

from rest_framework import serializers

from coordination.api.serializers.fields import IdField, StrictCharField
from coordination.models import Message


class MessageInput(serializers.Serializer):
    scope = StrictCharField(max_length=200)
    # Length and content are checked by the service, for every caller alike.
    body = StrictCharField(trim_whitespace=False)
    session = IdField(required=False, allow_null=True)


class MessageSerializer(serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.name", read_only=True, allow_null=True)

    class Meta:
        model = Message
        fields = ["id", "scope", "body", "session", "agent", "created_at"]
