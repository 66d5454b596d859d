"""Messages [post_message, list_messages]."""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from coordination import filtersets, selectors
from coordination.api.base import WorkspaceViewSet, parse
from coordination.api.serializers import (
    IdField,
    StrictCharField,
)
from coordination.models import Message
from coordination.services import messages


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


class MessageViewSet(mixins.ListModelMixin, WorkspaceViewSet):
    queryset = Message.objects.none()  # the model, for the schema; rows come from get_queryset
    serializer_class = MessageSerializer
    filterset_class = filtersets.MessageFilter

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.messages(self.workspace)

    @extend_schema(request=MessageInput, responses={201: MessageSerializer})
    def create(self, request: Request) -> Response:
        data = parse(MessageInput, request)
        message = messages.post_message(
            workspace=self.workspace,
            scope=data["scope"],
            body=data["body"],
            session_id=data.get("session"),
        )
        return Response(MessageSerializer(message).data, status=status.HTTP_201_CREATED)
