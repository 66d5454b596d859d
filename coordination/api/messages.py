"""Messages [post_message, list_messages]."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from coordination.api.access import key_of
from coordination.api.base import FilteredListViewSet, parse
from coordination.api.serializers.messages import MessageInput, MessageSerializer
from coordination.filtersets import MessageFilter
from coordination.selectors.messages import message_list
from coordination.selectors.messages import messages as listed_messages
from coordination.services import access, messages


@extend_schema(tags=["Messages"])
@extend_schema_view(
    list=extend_schema(
        summary="List messages",
        description="Newest first, by `scope` and `since`. `agent=<name>` lists what "
        "concerns that agent: the posts to `agent:<name>`, and to each issue it holds a "
        "live lease or live file claim on. Read-only.",
    ),
)
class MessageViewSet(FilteredListViewSet):
    selector = listed_messages
    list_selector = message_list
    serializer_class = MessageSerializer
    filterset_class = MessageFilter

    @extend_schema(
        summary="Post a message",
        description="Posts `body` to a scope of this workspace: `issue:<id>`, `agent:<name>` or "
        "`project:<key>`; an unknown target or session is a 400 naming the field "
        "(invariant 9 (workspace isolation)). Signed by `session` and its agent; with an agent "
        "key, by the key's agent, whose session it must be if one is given "
        "(invariant 13 (the key is the actor)). Changes nothing else.",
        request=MessageInput,
        responses={201: MessageSerializer},
    )
    def create(self, request: Request) -> Response:
        data = parse(MessageInput, request)
        message = messages.post_message(
            workspace=self.workspace,
            scope=data["scope"],
            body=data["body"],
            session_id=data.get("session"),
            author=access.author_of(key_of(request)),
            key=key_of(request),
        )
        return Response(MessageSerializer(message).data, status=status.HTTP_201_CREATED)
