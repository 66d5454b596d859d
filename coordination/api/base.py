"""What every viewset shares: the workspace scope, bounded ids, body parsing."""

from typing import Any

from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.serializers import Serializer

from coordination.api import serializers as s
from coordination.api.auth import workspace_of
from coordination.errors import NotFound

# Up to 19 digits reach the view (9223372036854775807 is a valid id); a value past
# the bigint range is a 404 there, never a database error. Longer ones match no route.
ID_REGEX = r"[0-9]{1,19}"


def parse(serializer_class: type[Serializer], request: Request, **kwargs: Any) -> dict[str, Any]:
    serializer = serializer_class(data=request.data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class WorkspaceViewSet(viewsets.GenericViewSet):
    """Base: every queryset comes from a selector scoped to the key's workspace."""

    lookup_value_regex = ID_REGEX

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # authentication first: 401 before 404
        if int(kwargs.get(self.lookup_field, 0)) > s.MAX_ID:
            raise NotFound("No such object.")

    @property
    def workspace(self) -> Any:
        return workspace_of(self.request)
