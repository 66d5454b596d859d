"""The work graph's links: POST /issues/{id}/links/ [link_issues] and
DELETE /issues/{id}/links/{link}/ [unlink_issues]."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from coordination.api.auth import workspace_of
from coordination.api.base import parse
from coordination.api.reference import examples as x
from coordination.api.reference import refusals as r
from coordination.api.serializers.links import LinkInput, LinkSerializer
from coordination.errors import NotFound
from coordination.models import MAX_ID
from coordination.services import graph


def known_id(value: int) -> int:
    """A URL id past bigint names nothing: 404, never a database error."""
    if value > MAX_ID:
        raise NotFound("No such object.")
    return value


class IssueLinksView(APIView):
    @extend_schema(
        tags=["Projects and issues"],
        summary="Link two issues",
        description="This issue *type* target: `blocks` (the target cannot be started until this "
        "issue is done or cancelled), `parent_of` (a child has one parent), `relates_to`, "
        "`discovered_from`. Linking again answers the link that exists (200). A `blocks` or "
        "`parent_of` link that would close a cycle is 409 `dependency_cycle` naming it, under any "
        "concurrency (invariant 16 (the work graph)); a link of an issue to itself or of an "
        "unknown type is 400; either issue unknown in this workspace is 404.",
        request=LinkInput,
        responses={
            201: LinkSerializer,
            200: OpenApiResponse(LinkSerializer, description="The link exists already."),
            **r.errors(r.DEPENDENCY_CYCLE),
        },
        examples=[
            x.sent("this issue blocks issue 15", {"type": "blocks", "target": 15}),
            x.shown("the link", x.LINK),
        ],
    )
    def post(self, request: Request, pk: int) -> Response:
        data = parse(LinkInput, request)
        linked = graph.link_issues(
            workspace=workspace_of(request),
            source_id=known_id(pk),
            type=data["type"],
            target_id=data["target"],
        )
        code = status.HTTP_201_CREATED if linked.created else status.HTTP_200_OK
        return Response(LinkSerializer(linked.link).data, status=code)


class IssueLinkView(APIView):
    @extend_schema(
        tags=["Projects and issues"],
        summary="Remove a link",
        description="Removes a link of this issue (either end). Removing the last "
        "unresolved blocker of an issue writes `issue.unblocked` (`resolved_by: null`).",
        responses={204: None},
    )
    def delete(self, request: Request, pk: int, link: int) -> Response:
        graph.unlink_issues(
            workspace=workspace_of(request), issue_id=known_id(pk), link_id=known_id(link)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
