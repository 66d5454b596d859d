"""The landing queue [queue_landing, list_landings, take_landings, land_landing,
reject_landing, return_landings] (invariant 21 (the default branch is always green))."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from coordination.api.base import FilteredListViewSet, parse
from coordination.api.reference import refusals as r
from coordination.api.serializers.landings import (
    BatchSerializer,
    LandingSerializer,
    LandInput,
    QueueInput,
    RejectInput,
    ReturnedSerializer,
    ReturnInput,
    TakeInput,
)
from coordination.filtersets import LandingFilter
from coordination.models import Landing
from coordination.selectors import landings as selected
from coordination.services import landings


@extend_schema(tags=["Landings"])
@extend_schema_view(
    list=extend_schema(
        summary="List landing entries",
        description="In order of arrival; each open entry with its `place` in its project's "
        "queue (the batch under test first).",
    ),
    retrieve=extend_schema(
        summary="Get a landing entry",
        description="Its state, its place while open, its tester, and why it was rejected.",
        responses={200: LandingSerializer, **r.errors(r.LANDING_NOT_FOUND)},
    ),
)
class LandingViewSet(mixins.RetrieveModelMixin, FilteredListViewSet):
    selector = selected.landings
    list_selector = selected.landing_list
    serializer_class = LandingSerializer
    filterset_class = LandingFilter

    def shown(self, entry: Landing) -> dict[str, object]:
        return dict(LandingSerializer(selected.shown(self.workspace, entry)).data)

    @extend_schema(
        summary="Queue a branch to land",
        description="Under the issue's live lease, held by `session` with `fence`: the entry "
        "keeps the issue's claimed paths, and is landable while that lease is the issue's "
        "live one (invariant 21 (the default branch is always green)). One open entry per issue.",
        request=QueueInput,
        responses={
            201: LandingSerializer,
            **r.errors(
                r.LANDING_EXISTS,
                r.SESSION_NOT_LIVE,
                r.LEASE_NOT_HELD,
                r.STALE_FENCE,
                r.ISSUE_NOT_FOUND,
            ),
        },
    )
    def create(self, request: Request) -> Response:
        data = parse(QueueInput, request)
        entry = landings.queue_landing(
            workspace=self.workspace,
            issue_id=data["issue"],
            session_id=data["session"],
            branch=data["branch"],
            commit=data["commit"],
            fence=data["fence"],
        )
        return Response(self.shown(entry), status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Take the head batch to test",
        description="The project's first open entries, in order, while their paths overlap "
        "none of the earlier ones', up to `max`: now `testing` under a new `fence`. Nothing "
        "when a live tester holds the batch (`busy` names it) or nothing waits. A batch whose "
        "tester is not live is taken again, whole; entries whose lease was lost are rejected "
        "`stale_fence` first.",
        request=TakeInput,
        responses={200: BatchSerializer, **r.errors(r.SESSION_NOT_LIVE, r.PROJECT_UNKNOWN)},
    )
    @action(detail=False, methods=["post"])
    def take(self, request: Request) -> Response:
        data = parse(TakeInput, request)
        batch = landings.take_batch(
            workspace=self.workspace,
            project_key=data["project"],
            session_id=data["session"],
            max_entries=data["max"],
        )
        entries = [selected.shown(self.workspace, entry) for entry in batch.entries]
        body = {"fence": batch.fence, "entries": entries, "busy": batch.busy}
        return Response(BatchSerializer(body).data)

    @extend_schema(
        summary="Report an entry landed",
        description="The tester moved the default branch to a tree that passed the check "
        "and holds the entry's work, `commit`.",
        request=LandInput,
        responses={200: LandingSerializer, **r.errors(r.LANDING_NOT_FOUND, r.STALE_BATCH)},
    )
    @action(detail=True, methods=["post"])
    def land(self, request: Request, pk: int) -> Response:
        data = parse(LandInput, request)
        entry = landings.land(
            workspace=self.workspace,
            landing_id=int(pk),
            session_id=data["session"],
            fence=data["fence"],
            commit=data["commit"],
        )
        return Response(self.shown(entry))

    @extend_schema(
        summary="Report an entry rejected",
        description="It does not apply on what landed before it (`conflict`), or its tree "
        "fails the check (`check_failed`, found by bisection); `detail` says which files or "
        "keeps the output's tail. Its agent gives the issue back.",
        request=RejectInput,
        responses={200: LandingSerializer, **r.errors(r.LANDING_NOT_FOUND, r.STALE_BATCH)},
    )
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: int) -> Response:
        data = parse(RejectInput, request)
        entry = landings.reject(
            workspace=self.workspace,
            landing_id=int(pk),
            session_id=data["session"],
            fence=data["fence"],
            reason=data["reason"],
            detail=data["detail"],
        )
        return Response(self.shown(entry))

    @extend_schema(
        summary="Return the rest of a batch",
        description="The batch's entries still `testing`, `queued` again at their place.",
        request=ReturnInput,
        responses={200: ReturnedSerializer, **r.errors(r.STALE_BATCH)},
    )
    @action(detail=False, methods=["post"], url_path="return")
    def return_batch(self, request: Request) -> Response:
        data = parse(ReturnInput, request)
        returned = landings.return_batch(
            workspace=self.workspace, session_id=data["session"], fence=data["fence"]
        )
        return Response({"returned": returned})
