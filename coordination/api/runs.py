"""Worktrees and runs [dispatch, dispatch_run, finish_run]: their thin viewsets."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from coordination.api.base import FilteredListViewSet, WorkspaceViewSet, parse
from coordination.api.reference import examples as x
from coordination.api.reference import refusals as r
from coordination.api.serializers.runs import (
    RunDispatchInput,
    RunFinishInput,
    RunSerializer,
    WorktreeInput,
    WorktreeSerializer,
)
from coordination.filtersets import RunFilter
from coordination.selectors import runs
from coordination.services import worktrees
from coordination.services.runs import dispatch_run, finish_run


@extend_schema(tags=["Worktrees and runs"])
@extend_schema_view(
    list=extend_schema(
        summary="List worktrees",
        description="The workspace's checkouts that runs lock (invariant 10 (lock mode per run)), "
        "ordered by slug. Read-only.",
    ),
)
class WorktreeViewSet(mixins.ListModelMixin, WorkspaceViewSet):
    selector = runs.worktrees
    serializer_class = WorktreeSerializer

    @extend_schema(
        summary="Create a worktree",
        description="Records a checkout that runs can lock: issues, agents and projects "
        "name it by slug (invariant 10 (lock mode per run)). A taken or malformed slug is a 400.",
        request=WorktreeInput,
        responses={201: WorktreeSerializer},
    )
    def create(self, request: Request) -> Response:
        worktree = worktrees.create_worktree(
            workspace=self.workspace, **parse(WorktreeInput, request)
        )
        return Response(WorktreeSerializer(worktree).data, status=status.HTTP_201_CREATED)


@extend_schema(tags=["Worktrees and runs"])
@extend_schema_view(
    list=extend_schema(
        summary="List runs",
        description="Newest first. A run whose session died stays `running` but is not "
        "`live` (invariant 1 (liveness)); `error` filters by why a run was skipped or cancelled. "
        "Read-only.",
    ),
    retrieve=extend_schema(
        summary="Get a run",
        description="One run: its lock mode and worktree (invariant 10 (lock mode per run)), the "
        "fence of its lock, its status, and whether its session is live now.",
    ),
)
class RunViewSet(mixins.RetrieveModelMixin, FilteredListViewSet):
    selector = runs.runs
    list_selector = runs.run_list
    serializer_class = RunSerializer
    filterset_class = RunFilter

    @extend_schema(
        summary="Dispatch a run",
        description="Starts a run of the issue for a live session. The issue's lease is taken "
        "first if the session lacks it, with the claim's own refusals "
        "(invariants 2 (one live lease per issue), 3 (the WIP cap) and 4 (stale reclaim)). Then "
        "the lock mode is resolved (invariant 10 (lock mode per run)): `exclusive` on the issue's "
        "worktree, else, if the issue needs a filesystem, on the agent's, else on the project's "
        "primary one; else `none`. With `primary_worktree: true`, exclusive on the project's "
        "primary worktree (400 if it has none). One live run per worktree: a lock held by a dead "
        "run is reclaimed `expired`. Both failures are recorded as runs: a busy worktree keeps the "
        "lease and records the run `cancelled` (409), an unresolved one releases the lease and "
        "records it `skipped` (422).",
        request=RunDispatchInput,
        responses={
            201: RunSerializer,
            **r.errors(
                r.ISSUE_NOT_FOUND,
                r.WORKTREE_BUSY,
                r.LEASE_HELD,
                r.WIP_LIMIT_REACHED,
                r.SESSION_NOT_LIVE,
                r.ISSUE_CLOSED,
                r.WORKTREE_UNRESOLVED,
            ),
        },
    )
    def create(self, request: Request) -> Response:
        data = parse(RunDispatchInput, request)
        run = dispatch_run(
            workspace=self.workspace,
            session_id=data["session"],
            issue_id=data["issue"],
            primary_worktree=data["primary_worktree"],
        )
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Finish a run",
        description="Ends a running run with `outcome` and releases its worktree lock `released` "
        "(invariant 7 (release reasons)), in one compare-and-set: of two finishers, the second "
        "gets `run_not_running`. With `fence` (the run's lock fence), only while that lock is "
        "unreleased: a lock reclaimed meanwhile refuses with `stale_fence` and the run stays as it "
        "was. The issue's lease is kept.",
        request=RunFinishInput,
        responses={200: RunSerializer, **r.errors(r.RUN_NOT_RUNNING, r.STALE_LOCK_FENCE)},
        examples=[
            x.sent("succeeded, fenced", {"outcome": "succeeded", "fence": x.RUN["fence"]}),
            x.shown("succeeded", x.FINISHED_RUN),
        ],
    )
    @action(detail=True, methods=["post"])
    def finish(self, request: Request, pk: str) -> Response:
        data = parse(RunFinishInput, request)
        run = finish_run(
            workspace=self.workspace,
            run_id=int(pk),
            outcome=data["outcome"],
            fence=data.get("fence"),
        )
        return Response(RunSerializer(run).data)
