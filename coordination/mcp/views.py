"""``/mcp``: a Django view that hands each request to the MCP SDK's Streamable HTTP transport.

Why a view and not the SDK's ASGI app mounted beside Django in asgi.py: a view is
served by everything that serves Django (``make run``'s runserver, gunicorn's WSGI
workers, the test live server), passes through Django's middleware and host
checks, and authenticates with the REST API's own classes. Stateless JSON
responses make that possible: one POST in, one JSON answer out, no stream held
open, so ``async_to_sync`` can run the SDK's async handling to completion inside
the request.

The view is a DRF view for the API's behaviour around the protocol: a missing,
unknown or revoked key is 401 ``unauthenticated``, another method than POST is
405 ``method_not_allowed``, both in the API's error shape, before any MCP.
"""

import json
import logging
from http import HTTPStatus
from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, status
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from coordination.api.auth import ApiKeyAuthentication
from coordination.mcp.rest import SERVER_ERROR
from coordination.mcp.server import handle_http
from coordination.models import ApiKey
from coordination.unavailable import is_database_unavailable

logger = logging.getLogger(__name__)

# Hop-by-hop or recomputed by Django: not copied from the SDK's answer.
NOT_COPIED = frozenset({"content-length", "connection", "transfer-encoding"})
ERROR_CODES = {
    400: "invalid",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


class HoldsApiKey(permissions.BasePermission):
    """Agents only: the request carries a valid workspace API key."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, ApiKey)


class McpView(APIView):
    authentication_classes = [ApiKeyAuthentication]
    permission_classes = [HoldsApiKey]
    # Not throttled here: a tool call is throttled by its REST view, once, like the
    # REST call it is (a refusal is a tool error `throttled` the agent can read);
    # the protocol's own messages (initialize, tools/list, ping) touch no data.
    throttle_classes: list[type[BaseThrottle]] = []
    # The body goes to the SDK untouched: it parses the JSON and the JSON-RPC.
    parser_classes: list[type[BaseParser]] = []

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # Errors answer JSON whatever the Accept header says (a client opening an SSE
        # stream with GET gets its 405 in JSON, not a 406).
        return super().perform_content_negotiation(request, force=True)

    def handle_exception(self, exc: Exception) -> Response:
        try:
            return super().handle_exception(exc)
        except Exception as error:
            if is_database_unavailable(error):
                raise  # DatabaseUnavailableMiddleware answers 503 `unavailable` in JSON
            # handler500 answers JSON under /api/ only: answer it here for /mcp.
            logger.exception("MCP request failed")
            return Response(SERVER_ERROR, status=status.HTTP_500_INTERNAL_SERVER_ERROR)

    @extend_schema(exclude=True)
    def post(self, request: Request) -> HttpResponse:
        django_request = request._request
        body = django_request.body  # too large: 413 payload_too_large, by the API's handler
        if django_request.content_type != "application/json":
            return Response(
                {"code": "unsupported_media_type", "detail": "Send the body as application/json."},
                status=status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            )
        status_code, headers, content = async_to_sync(handle_http)(django_request, body)
        if status_code >= 400 and not _is_json(content):
            # The transport's few bare HTTP refusals still answer in the API's shape.
            detail = content.decode("utf-8", "replace") or HTTPStatus(status_code).phrase
            code = ERROR_CODES.get(status_code, "invalid")
            return Response({"code": code, "detail": detail}, status=status_code)
        response = HttpResponse(content, status=status_code)
        for name, value in headers:
            if name.lower() not in NOT_COPIED:
                response[name] = value
        return response


def _is_json(content: bytes) -> bool:
    try:
        json.loads(content)
    except ValueError:
        return False
    return True
