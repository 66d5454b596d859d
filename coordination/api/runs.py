"""Worktrees and runs: input and output serializers, and their thin viewsets."""

from typing import Any

from django.core.validators import validate_slug
from django.db.models import OuterRef, QuerySet, Subquery
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from coordination import filtersets, selectors
from coordination.api.base import WorkspaceViewSet, parse
from coordination.api.serializers import (
    BlankAsNullChoiceField,
    FenceField,
    IdField,
    StrictCharField,
)
from coordination.models import Run, Worktree, WorktreeLock
from coordination.services import worktrees

# --- serializers -----------------------------------------------------------------


class WorktreeInput(serializers.Serializer):
    slug = StrictCharField(max_length=64, validators=[validate_slug])
    name = StrictCharField(max_length=200)
    path = StrictCharField(max_length=1024, required=False, allow_blank=True)
    branch = StrictCharField(max_length=200, required=False, allow_blank=True)


class WorktreeSerializer(serializers.ModelSerializer):
    class Meta:
        model = Worktree
        fields = ["id", "slug", "name", "path", "branch", "created_at"]


class RunDispatchInput(serializers.Serializer):
    session = IdField()
    issue = IdField()


class RunFinishInput(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=[Run.Status.SUCCEEDED, Run.Status.FAILED])
    fence = FenceField(
        help_text="The fence of the run's worktree lock: finish only while it is current."
    )


def with_lock_fence(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Each run with ``lock_fence``: the fence of its worktree lock (a run takes at
    most one), or None. One subquery, so a list costs no query per row."""
    lock = WorktreeLock.objects.filter(run=OuterRef("pk")).order_by("-id").values("fence")[:1]
    return runs.annotate(lock_fence=Subquery(lock))


class RunSerializer(serializers.ModelSerializer):
    worktree = serializers.CharField(source="worktree.slug", read_only=True, allow_null=True)
    error = BlankAsNullChoiceField(Run.Error.choices)
    live = serializers.BooleanField(source="is_live", read_only=True)
    fence = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [
            "id",
            "issue",
            "session",
            "lock_mode",
            "worktree",
            "fence",
            "status",
            "live",
            "error",
            "started_at",
            "finished_at",
        ]

    def get_fence(self, run: Run) -> int | None:
        if hasattr(run, "lock_fence"):  # fetched through with_lock_fence()
            return run.lock_fence
        return run.locks.order_by("-id").values_list("fence", flat=True).first()


# --- viewsets ----------------------------------------------------------------------


class WorktreeViewSet(mixins.ListModelMixin, WorkspaceViewSet):
    queryset = Worktree.objects.none()  # the model, for the schema; rows come from get_queryset
    serializer_class = WorktreeSerializer

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.worktrees(self.workspace)

    @extend_schema(request=WorktreeInput, responses={201: WorktreeSerializer})
    def create(self, request: Request) -> Response:
        worktree = worktrees.create_worktree(
            workspace=self.workspace, **parse(WorktreeInput, request)
        )
        return Response(WorktreeSerializer(worktree).data, status=status.HTTP_201_CREATED)


class RunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, WorkspaceViewSet):
    queryset = Run.objects.none()  # the model, for the schema; rows come from get_queryset
    serializer_class = RunSerializer
    filterset_class = filtersets.RunFilter

    def get_queryset(self) -> QuerySet[Any]:
        return with_lock_fence(selectors.runs(self.workspace))

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
