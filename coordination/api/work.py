"""POST /work/start/ [start_work] and POST /work/finish/ [finish_work]."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from coordination import selectors
from coordination.api.auth import workspace_of
from coordination.api.base import parse
from coordination.api.serializers.work import (
    FinishedSerializer,
    FinishWorkInput,
    StartedSerializer,
    StartWorkInput,
)
from coordination.services import work


class StartWorkView(APIView):
    @extend_schema(
        request=StartWorkInput,
        responses={
            201: StartedSerializer,
            409: OpenApiResponse(description="lease_held, wip_limit_reached, file_conflict"),
        },
        description="Register a session, lease the issue, claim the paths, say so on the "
        "issue: all or nothing.",
    )
    def post(self, request: Request) -> Response:
        data = parse(StartWorkInput, request)
        started = work.start_work(
            workspace=workspace_of(request),
            agent_name=data["agent"],
            issue_id=data["issue"],
            paths=data.get("paths"),
            role=data.get("role"),
            department=data.get("department"),
            worktree_slug=data.get("worktree"),
        )
        return Response(StartedSerializer(started).data, status=status.HTTP_201_CREATED)


class FinishWorkView(APIView):
    @extend_schema(
        request=FinishWorkInput,
        responses={
            200: FinishedSerializer,
            409: OpenApiResponse(
                description="invalid_transition (+missing), lease_not_held, stale_fence"
            ),
        },
        description="Move the issue, release its file claims and lease, end the session.",
    )
    def post(self, request: Request) -> Response:
        data = parse(FinishWorkInput, request)
        finished = work.finish_work(
            workspace=workspace_of(request),
            session_id=data["session"],
            issue_id=data["issue"],
            to=data["to"],
            report=dict(data["report"]) if "report" in data else None,
            fence=data.get("fence"),
        )
        selectors.issue_as_shown(finished.issue)  # its lease and relations, as listed
        return Response(FinishedSerializer(finished).data)
