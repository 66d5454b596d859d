"""GET /events/ [list_events] and GET /events/stream/ (Server-Sent Events)."""

import json
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder
from rest_framework.views import APIView

from coordination import feed
from coordination.api.auth import workspace_of
from coordination.api.reference import examples as x
from coordination.api.serializers.events import (
    EventPageSerializer,
    EventQuery,
    EventSerializer,
    StreamQuery,
)
from coordination.errors import InvalidInput
from coordination.models import MAX_ID, Workspace
from coordination.selectors import lookups

LIST_DESCRIPTION = (
    "The workspace's events with an id greater than `after`, in id order "
    "(invariant 12 (one event per change)). Pass the `next` of each answer as the next `after`: "
    "you see every event exactly once, even though transactions commit out of order. With `wait`, "
    "a call that finds none holds until one arrives (and answers at once) or the wait ends. "
    "`missed` is true when events after `after` were already pruned; `next` then moves past them. "
    "Read-only."
)


# One frame of the stream, as an SSE client parses it (the schema of each event, not of
# the whole body): ``data`` is the event's JSON, ``event`` its type, ``id`` its id.
SSE_FRAME = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "event": {"type": "string"},
        "data": {"type": "string", "description": "The event, as JSON."},
        "retry": {"type": "integer"},
    },
}


def parse_query(
    request: Request, workspace: Workspace, serializer: type[EventQuery] = EventQuery
) -> tuple[dict[str, Any], feed.EventFilter]:
    query = serializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    data = dict(query.validated_data)
    project = data.get("project")
    agent = data.get("agent")
    filters = feed.EventFilter(
        types=data.get("type"),
        project_id=lookups.get_project(workspace, project, field="project").pk if project else None,
        agent_id=lookups.get_agent(workspace, agent, field="agent").pk if agent else None,
        issue_id=data.get("issue"),
        session_id=data.get("session"),
    )
    return data, filters


def page_body(page: feed.Page) -> dict[str, Any]:
    return {
        "events": EventSerializer(page.events, many=True).data,
        "next": page.next,
        "missed": page.missed,
    }


class EventListView(APIView):
    @extend_schema(
        tags=["Events"],
        summary="List events",
        description=LIST_DESCRIPTION,
        parameters=[EventQuery],
        responses={200: EventPageSerializer},
    )
    def get(self, request: Request) -> Response:
        workspace = workspace_of(request)
        query, filters = parse_query(request, workspace)

        def read() -> feed.Page:
            return feed.read(workspace, after=query["after"], filters=filters, limit=query["limit"])

        page = feed.wait_for(read, seconds=query["wait"]) if query["wait"] else read()
        return Response(page_body(page))


class EventStreamRenderer(BaseRenderer):
    """Lets a request that accepts only ``text/event-stream`` through negotiation; the
    stream itself is a StreamingHttpResponse, and errors are JSON."""

    media_type = "text/event-stream"
    format = "event-stream"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return json.dumps(data, cls=JSONEncoder).encode()


class JsonErrors(BaseContentNegotiation):
    """Errors of the stream are always JSON, whatever ``Accept`` says."""

    def select_parser(self, request: Any, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(self, request: Any, renderers: Any, format_suffix: Any = None) -> Any:
        return JSONRenderer(), JSONRenderer.media_type


def frame(event_id: int, type: str, data: Any) -> str:
    return f"id: {event_id}\nevent: {type}\ndata: {json.dumps(data, cls=JSONEncoder)}\n\n"


def frames(workspace: Workspace, filters: feed.EventFilter, *, after: int) -> Iterator[str]:
    """The stream: events as they commit, a comment every keep-alive period, and the
    end after ``PROJEKTOR_EVENT_STREAM_SECONDS`` (the client reconnects with
    ``Last-Event-ID``). Between reads it holds no transaction, nor on PostgreSQL a
    connection (``feed.release_connection``)."""
    end = time.monotonic() + settings.PROJEKTOR_EVENT_STREAM_SECONDS
    keepalive = settings.PROJEKTOR_EVENT_STREAM_KEEPALIVE_SECONDS
    cursor = after
    yield "retry: 1000\n\n"
    while (now := time.monotonic()) < end:

        def read(after: int = cursor) -> feed.Page:
            return feed.read(workspace, after=after, filters=filters, limit=feed.MAX_LIMIT)

        page = feed.wait_for(
            read,
            seconds=0,
            deadline=min(end, now + keepalive),
        )
        if page.missed and page.next > cursor and not page.events:
            yield frame(page.next, "missed", {"after": cursor, "next": page.next})
        for event in page.events:
            yield frame(event.pk, event.type, EventSerializer(event).data)
        if not page.events and not page.missed:
            yield ": keep-alive\n\n"
        cursor = page.next
    feed.release_connection()


def last_event_id(request: Request, default: int) -> int:
    raw = request.headers.get("Last-Event-ID")
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or int(raw) > MAX_ID:
        raise InvalidInput(f"Last-Event-ID {raw[:40]!r} is not an event id.", field="Last-Event-ID")
    return int(raw)


class EventStreamView(APIView):
    renderer_classes = [JSONRenderer, EventStreamRenderer]
    content_negotiation_class = JsonErrors

    @extend_schema(
        tags=["Events"],
        summary="Stream events (Server-Sent Events)",
        description="The same events and filters as GET /events/, as `text/event-stream`: "
        "one `id:`/`event:`/`data:` frame per event (`event:` the type, `data:` the event's "
        "JSON), a comment every 15 s, and the end of the stream after at most 60 s: "
        "EventSource reconnects with `Last-Event-ID`, which resumes after that event "
        "(it wins over `after`). A `missed` frame says events were pruned before the "
        "cursor. Read-only.",
        parameters=[
            StreamQuery,
            OpenApiParameter(
                "Last-Event-ID", OpenApiTypes.INT, OpenApiParameter.HEADER, required=False
            ),
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                SSE_FRAME,
                description="The stream of event frames.",
                examples=[
                    OpenApiExample(
                        "one event, then a keep-alive",
                        value=frame(812, "lease.released", x.EVENT) + ": keep-alive\n\n",
                        response_only=True,
                    )
                ],
            )
        },
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        workspace = workspace_of(request)
        query, filters = parse_query(request, workspace, StreamQuery)
        after = last_event_id(request, query["after"])
        response = StreamingHttpResponse(
            frames(workspace, filters, after=after), content_type="text/event-stream"
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # proxies pass each frame on at once
        return response
