"""A tool call is its REST call, made in-process.

The request is built as the REST client would send it: the caller's own
``Authorization`` header (so the view authenticates, scopes and throttles it as
any REST call), a JSON body or a query string, and the outer request's host and
address. It is routed with ``django.urls.resolve`` and the view's response is
rendered; its status and body are the tool's answer, byte for byte. Synchronous:
the ORM is, so the MCP server calls it through ``sync_to_async``.
"""

import io
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest
from django.urls import resolve
from rest_framework.exceptions import ValidationError
from rest_framework.fields import Field, empty
from rest_framework.renderers import JSONRenderer

from coordination.api.exceptions import exception_handler
from coordination.api.serializers.fields import IdField, StrictCharField
from coordination.models.resources import NAME_PATTERN
from coordination.services.resources import NAME_HINT
from coordination.tools import ToolSpec
from coordination.unavailable import UNAVAILABLE, is_database_unavailable

logger = logging.getLogger(__name__)

# Outer headers that belong to the MCP exchange, not to the REST call.
NOT_FORWARDED = ("HTTP_COOKIE", "HTTP_ACCEPT", "HTTP_MCP_", "HTTP_LAST_EVENT_ID")
SERVER_ERROR = {"code": "server_error", "detail": "Internal error; it has been logged."}


@dataclass(frozen=True)
class RestAnswer:
    status: int
    content: bytes  # the JSON body, as the REST API rendered it

    @property
    def is_error(self) -> bool:
        return self.status >= 400


def refusal(error: Exception) -> RestAnswer:
    """``error`` answered as the REST API answers it (a ValidationError: 400 ``invalid``)."""
    response = exception_handler(error, {})
    assert response is not None, error
    return RestAnswer(response.status_code, JSONRenderer().render(response.data))


def _check_name(value: str) -> None:
    if not re.fullmatch(NAME_PATTERN, value):  # whole: no newline after the last character
        raise ValidationError(f"A resource's name is {NAME_HINT}.")


def name_field() -> StrictCharField:
    """A resource's name as the URL takes it: checked before it is put in the path, so
    that no name reaches another route (``a/release``) or none (the API's 404)."""
    return StrictCharField(trim_whitespace=False, validators=[_check_name])


def _url_id(tool: ToolSpec, name: str, arguments: dict[str, Any]) -> str | RestAnswer:
    """The URL id the argument ``name`` gives (removed from ``arguments``), validated as
    the REST bodies validate ids and named after its argument: a missing or malformed one
    is a 400 `invalid`, as for a body. A name is a resource's when the tool says so."""
    field: Field[Any, Any, Any, Any] = (
        name_field() if tool.url_id_is_name and name == tool.url_id else IdField()
    )
    try:
        return str(field.run_validation(arguments.pop(name, empty)))
    except ValidationError as error:
        return refusal(ValidationError({name: error.detail}))


def _query_string(arguments: Mapping[str, Any]) -> str:
    """JSON arguments as REST query parameters: true/false, numbers, repeated lists."""
    pairs: list[tuple[str, str]] = []
    for name, value in arguments.items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            if item is None:
                continue
            if isinstance(item, bool):
                pairs.append((name, "true" if item else "false"))
            elif isinstance(item, dict | list):
                pairs.append((name, json.dumps(item)))
            else:
                pairs.append((name, str(item)))
    return urlencode(pairs)


def _environ(outer: HttpRequest, method: str, path: str, query: str, body: bytes) -> dict[str, Any]:
    environ: dict[str, Any] = {
        key: value
        for key, value in outer.META.items()
        if key.startswith("HTTP_") and not key.startswith(NOT_FORWARDED)
    }
    environ.update(
        {
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": outer.META.get("SCRIPT_NAME", ""),
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_ACCEPT": "application/json",
            "SERVER_NAME": outer.META.get("SERVER_NAME", "localhost"),
            "SERVER_PORT": str(outer.META.get("SERVER_PORT", "80")),
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": outer.META.get("REMOTE_ADDR", ""),
            "wsgi.input": io.BytesIO(body),
            "wsgi.url_scheme": outer.scheme,
        }
    )
    return environ


def call(tool: ToolSpec, arguments: Mapping[str, Any], outer: HttpRequest) -> RestAnswer:
    """Make ``tool``'s REST call with ``arguments``, authenticated as ``outer`` was."""
    arguments = {**tool.defaults, **arguments}
    path = tool.path
    placeholders = dict(tool.path_ids)
    if tool.url_id is not None:
        placeholders = {"id": tool.url_id, **placeholders}
    for placeholder, name in placeholders.items():
        url_id = _url_id(tool, name, arguments)
        if isinstance(url_id, RestAnswer):
            return url_id
        path = path.replace(f"{{{placeholder}}}", url_id)
    if tool.method == "GET":
        query, body = _query_string(arguments), b""
    else:
        query, body = "", json.dumps(arguments).encode()
    request = WSGIRequest(_environ(outer, tool.method, path, query, body))
    match = resolve(request.path_info)
    request.resolver_match = match
    try:
        response = match.func(request, *match.args, **match.kwargs)
        render = getattr(response, "render", None)
        if callable(render):
            render()
    except Exception as error:
        # What the middleware and handler500 answer the REST call: 503 while the
        # database is unavailable, else a logged 500.
        if is_database_unavailable(error):
            logger.warning("Database unavailable for MCP tool %s: %s", tool.name, error)
            return RestAnswer(503, json.dumps(UNAVAILABLE).encode())
        logger.exception("MCP tool %s: %s %s failed", tool.name, tool.method, path)
        return RestAnswer(500, json.dumps(SERVER_ERROR).encode())
    return RestAnswer(response.status_code, response.content)
