"""Sessions [register_agent, heartbeat_agent, end_agent, list_active_agents]."""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from coordination import filtersets, selectors
from coordination.api.base import WorkspaceViewSet, parse
from coordination.api.serializers.sessions import SessionRegisterInput, SessionSerializer
from coordination.services import agents


class SessionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, WorkspaceViewSet):
    selector = selectors.sessions
    serializer_class = SessionSerializer
    filterset_class = filtersets.SessionFilter

    @extend_schema(request=SessionRegisterInput, responses={201: SessionSerializer})
    def create(self, request: Request) -> Response:
        data = parse(SessionRegisterInput, request)
        session = agents.register_session(
            workspace=self.workspace,
            agent_name=data["agent"],
            role=data.get("role"),
            department=data.get("department"),
            worktree_slug=data.get("worktree"),
        )
        return Response(SessionSerializer(session).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=SessionSerializer)
    @action(detail=True, methods=["post"])
    def heartbeat(self, request: Request, pk: str) -> Response:
        session = agents.heartbeat_session(workspace=self.workspace, session_id=int(pk))
        return Response(SessionSerializer(session).data)

    @extend_schema(request=None, responses=SessionSerializer)
    @action(detail=True, methods=["post"])
    def end(self, request: Request, pk: str) -> Response:
        session = agents.end_session(workspace=self.workspace, session_id=int(pk))
        return Response(SessionSerializer(session).data)
