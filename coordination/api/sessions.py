"""Sessions [register_agent, heartbeat_agent, end_agent, list_active_agents]."""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from coordination import filtersets, selectors
from coordination.api import serializers as s
from coordination.api.base import WorkspaceViewSet, parse
from coordination.models import AgentSession
from coordination.services import agents


class SessionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, WorkspaceViewSet):
    queryset = AgentSession.objects.none()  # the model, for the schema; rows come from get_queryset
    serializer_class = s.SessionSerializer
    filterset_class = filtersets.SessionFilter

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.sessions(self.workspace)

    @extend_schema(request=s.SessionRegisterInput, responses={201: s.SessionSerializer})
    def create(self, request: Request) -> Response:
        data = parse(s.SessionRegisterInput, request)
        session = agents.register_session(
            workspace=self.workspace,
            agent_name=data["agent"],
            role=data.get("role"),
            department=data.get("department"),
            worktree_slug=data.get("worktree"),
        )
        return Response(s.SessionSerializer(session).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=s.SessionSerializer)
    @action(detail=True, methods=["post"])
    def heartbeat(self, request: Request, pk: str) -> Response:
        session = agents.heartbeat_session(workspace=self.workspace, session_id=int(pk))
        return Response(s.SessionSerializer(session).data)

    @extend_schema(request=None, responses=s.SessionSerializer)
    @action(detail=True, methods=["post"])
    def end(self, request: Request, pk: str) -> Response:
        session = agents.end_session(workspace=self.workspace, session_id=int(pk))
        return Response(s.SessionSerializer(session).data)
