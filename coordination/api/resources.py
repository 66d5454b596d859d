"""Resources [acquire_resource, release_resource, list_resources] and their holds."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from coordination.api.base import FilteredListViewSet, parse
from coordination.api.reference import refusals as r
from coordination.api.serializers.resources import (
    AcquireInput,
    HoldReleaseInput,
    HoldSerializer,
    ResourceChangeInput,
    ResourceInput,
    ResourceSerializer,
)
from coordination.filtersets import ResourceFilter, ResourceHoldFilter
from coordination.models import Resource
from coordination.selectors import resources as selected
from coordination.services import resources

NAME_REGEX = r"[a-z0-9][a-z0-9._:-]{0,63}"


@extend_schema(tags=["Resources"])
@extend_schema_view(
    list=extend_schema(
        summary="List resources",
        description="By name, each with what is in use (live holds only: a dead session's "
        "units are available at once), its live holders and the calls waiting for it.",
    ),
    retrieve=extend_schema(
        summary="Get a resource",
        description="Its capacity, what is in use (live holds only), its live holders, "
        "and how many calls wait for it now.",
        responses={200: ResourceSerializer, **r.errors(r.RESOURCE_NOT_FOUND)},
    ),
)
class ResourceViewSet(mixins.RetrieveModelMixin, FilteredListViewSet):
    selector = selected.resources
    list_selector = selected.resource_list
    serializer_class = ResourceSerializer
    filterset_class = ResourceFilter
    lookup_field = "name"
    lookup_url_kwarg = "pk"  # as every route's: the URL's one id, here the name
    lookup_value_regex = NAME_REGEX

    def shown(self, resource: Resource) -> dict[str, object]:
        return dict(ResourceSerializer(selected.resources(self.workspace).get(pk=resource.pk)).data)

    @extend_schema(
        summary="Create a resource",
        description="A named thing agents share that no path names, with `capacity` units "
        "(invariant 20 (resources are counted)). The name is unique in the workspace.",
        request=ResourceInput,
        responses={201: ResourceSerializer},
    )
    def create(self, request: Request) -> Response:
        data = parse(ResourceInput, request)
        resource = resources.create_resource(workspace=self.workspace, **data)
        return Response(self.shown(resource), status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Change a resource's capacity or description",
        description="A capacity lowered below what is held takes nothing back: the live "
        "holds keep their units, and nothing is granted until they fit again.",
        request=ResourceChangeInput,
        responses={200: ResourceSerializer, **r.errors(r.RESOURCE_NOT_FOUND)},
    )
    def partial_update(self, request: Request, pk: str) -> Response:
        data = parse(ResourceChangeInput, request)
        resource = resources.update_resource(workspace=self.workspace, name=pk, **data)
        return Response(self.shown(resource))

    @extend_schema(
        summary="Acquire units of a resource",
        description="Takes `units` for a live session, each a distinct slot in `0..capacity-1`, "
        "lowest first (invariant 20 (resources are counted)). A dead session's units are taken "
        "back `expired` in this call when this grant needs them (invariant 4 (stale reclaim)). "
        "With `wait`, waits up to that many seconds in the resource's line: first come, first "
        "served; a later call gets nothing while an earlier live one waits. A session that holds "
        "units of it already gets that hold back, unchanged (200).",
        request=AcquireInput,
        responses={
            201: HoldSerializer,
            200: HoldSerializer,
            **r.errors(r.RESOURCE_NOT_FOUND, r.RESOURCE_BUSY, r.SESSION_NOT_LIVE),
        },
    )
    @action(detail=True, methods=["post"])
    def acquire(self, request: Request, pk: str) -> Response:
        data = parse(AcquireInput, request)
        granted = resources.acquire(
            workspace=self.workspace,
            name=pk,
            session_id=data["session"],
            units=data["units"],
            issue_id=data.get("issue"),
            wait=data["wait"],
        )
        code = status.HTTP_201_CREATED if granted.created else status.HTTP_200_OK
        return Response(HoldSerializer(granted.hold).data, status=code)

    @extend_schema(
        summary="Release a session's hold of a resource",
        description="Released `released` (invariant 7 (release reasons)); with `fence`, only while "
        "it is the hold's.",
        request=HoldReleaseInput,
        responses={
            200: HoldSerializer,
            **r.errors(r.RESOURCE_NOT_FOUND, r.HOLD_NOT_HELD, r.STALE_HOLD_FENCE),
        },
    )
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str) -> Response:
        data = parse(HoldReleaseInput, request)
        hold = resources.release(
            workspace=self.workspace,
            name=pk,
            session_id=data["session"],
            fence=data.get("fence"),
        )
        return Response(HoldSerializer(hold).data)


@extend_schema(tags=["Resources"])
@extend_schema_view(
    list=extend_schema(
        summary="List resource holds",
        description="Newest first; `active=true` keeps the unreleased ones, `resource` takes "
        "a resource's name. Read-only.",
    ),
)
class ResourceHoldViewSet(FilteredListViewSet):
    selector = selected.holds
    list_selector = selected.hold_list
    serializer_class = HoldSerializer
    filterset_class = ResourceHoldFilter
