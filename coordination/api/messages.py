"""Messages [post_message, list_messages]."""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.request import Request
from rest_framework.response import Response

from coordination import filtersets, selectors
from coordination.api.base import WorkspaceViewSet, parse
from coordination.api.serializers.messages import MessageInput, MessageSerializer
from coordination.services import messages


class MessageViewSet(mixins.ListModelMixin, WorkspaceViewSet):
    selector = selectors.messages
    serializer_class = MessageSerializer
    filterset_class = filtersets.MessageFilter

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
