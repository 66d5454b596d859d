"""Worktrees and runs [dispatch, dispatch_run, finish_run]: their thin viewsets."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from coordination import filtersets, selectors
from coordination.api.base import WorkspaceViewSet, parse
from coordination.api.serializers.runs import (
    RunDispatchInput,
    RunFinishInput,
    RunSerializer,
    WorktreeInput,
    WorktreeSerializer,
)
from coordination.services import worktrees


class WorktreeViewSet(mixins.ListModelMixin, WorkspaceViewSet):
    selector = selectors.worktrees
    serializer_class = WorktreeSerializer

    @extend_schema(request=WorktreeInput, responses={201: WorktreeSerializer})
    def create(self, request: Request) -> Response:
        worktree = worktrees.create_worktree(
            workspace=self.workspace, **parse(WorktreeInput, request)
        )
        return Response(WorktreeSerializer(worktree).data, status=status.HTTP_201_CREATED)


class RunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, WorkspaceViewSet):
    selector = selectors.runs
    serializer_class = RunSerializer
    filterset_class = filtersets.RunFilter

    @extend_schema(
        request=RunDispatchInput,
        responses={
            201: RunSerializer,
            409: OpenApiResponse(
                description="worktree_busy, lease_held, wip_limit_reached, session_not_live"
            ),
            422: OpenApiResponse(description="worktree_unresolved"),
        },
    )
    def create(self, request: Request) -> Response:
        data = parse(RunDispatchInput, request)
        run = worktrees.dispatch_run(
            workspace=self.workspace, session_id=data["session"], issue_id=data["issue"]
        )
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=RunFinishInput,
        responses={
            200: RunSerializer,
            409: OpenApiResponse(description="run_not_running, stale_fence"),
        },
    )
    @action(detail=True, methods=["post"])
    def finish(self, request: Request, pk: str) -> Response:
        data = parse(RunFinishInput, request)
        run = worktrees.finish_run(
            workspace=self.workspace,
            run_id=int(pk),
            outcome=data["outcome"],
            fence=data.get("fence"),
        )
        return Response(RunSerializer(run).data)
