"""What every viewset shares: the workspace scope, bounded ids, body parsing, lists."""

from collections.abc import Callable
from typing import Any, ClassVar

from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import mixins, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from coordination.api.auth import workspace_of
from coordination.db.rows import Listing
from coordination.errors import NotFound
from coordination.models import MAX_ID, Workspace

# Up to 19 digits reach the view (9223372036854775807 is a valid id); a value past
# the bigint range is a 404 there, never a database error. Longer ones match no route.
ID_REGEX = r"[0-9]{1,19}"


def parse(serializer_class: type[Serializer], request: Request, **kwargs: Any) -> dict[str, Any]:
    serializer = serializer_class(data=request.data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class DocumentedFilters(DjangoFilterBackend):
    """Puts a list's ``filterset_class`` in the reference (its query parameters), and
    filters nothing: the list selector reads the query through that FilterSet."""

    def filter_queryset(self, request: Request, queryset: Any, view: Any) -> Any:
        return queryset


class WorkspaceViewSet(viewsets.GenericViewSet):
    """Base: every queryset comes from a selector scoped to the key's workspace."""

    # A read viewset is declared as selector + serializer_class: its rows are
    # ``selector(workspace)``, a plain function of coordination.selectors.
    selector: ClassVar[Callable[[Workspace], QuerySet[Any]]]
    lookup_value_regex = ID_REGEX
    filter_backends = [DocumentedFilters]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # authentication first: 401 before 404
        if int(kwargs.get(self.lookup_field, 0)) > MAX_ID:
            raise NotFound("No such object.")

    def get_queryset(self) -> QuerySet[Any]:
        if getattr(self, "swagger_fake_view", False):  # the schema asks for the model only
            return self.get_serializer_class().Meta.model.objects.none()  # type: ignore[attr-defined]
        return type(self).selector(self.workspace)  # off the class: not bound to self

    @property
    def workspace(self) -> Any:
        return workspace_of(self.request)


class FilteredListViewSet(mixins.ListModelMixin, WorkspaceViewSet):
    """A collection whose list is ``list_selector(workspace=, filters=)``: the query is
    passed through, and the selector reads it with its FilterSet (a bad value is a
    400). ``filterset_class`` names that FilterSet for the reference."""

    list_selector: ClassVar[Callable[..., QuerySet[Any] | Listing[Any]]]
    filterset_class: ClassVar[type[Any]]

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        rows = type(self).list_selector(workspace=self.workspace, filters=request.query_params)
        page = self.paginate_queryset(rows)  # type: ignore[arg-type]  # paged as a queryset
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
