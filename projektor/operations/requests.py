"""One log line and the request metrics for every request, with its request id.

The id is the incoming ``X-Request-ID`` when it is a sane token (printable, up to
128 characters: it is written into every log line), else a new one; it is echoed in
the response's ``X-Request-ID`` and set on every record logged meanwhile.

The line names the workspace, the key and the agent when the request shows them
without a query: the API key's id and workspace (``request.auth``, which DRF sets on
the Django request too); the workspace a person's request named (header, query or
page URL); the agent the call acted as: an agent key's own (invariant 13 (the key is the actor): the
key is the actor, loaded with it), else the one a successful API answer names (a session,
lease, claim or message names its agent; start_work's its session's).
"""

import logging
import os
import re
import time
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from coordination.models import ApiKey
from projektor.operations import metrics
from projektor.operations.logs import REQUEST_LOGGER, current_request_id
from projektor.operations.routes import route_of

logger = logging.getLogger(REQUEST_LOGGER)

REQUEST_ID_HEADER = "X-Request-ID"
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+=@-]{1,128}")
WORKSPACE_HEADER = "X-Projektor-Workspace"
REQUEST_ID_META = "HTTP_X_REQUEST_ID"
WORKSPACE_META = "HTTP_X_PROJEKTOR_WORKSPACE"


def request_id_of(request: HttpRequest) -> str:
    # META, not request.headers: that would build a dict of every header on each request.
    incoming = request.META.get(REQUEST_ID_META, "")
    if SANE_REQUEST_ID.fullmatch(incoming):
        return incoming
    return os.urandom(16).hex()  # what uuid4().hex was: 32 hex digits, in one call


def workspace_named(request: HttpRequest, key: ApiKey | None) -> str | None:
    if key is not None:
        # The key's workspace, loaded with it by authentication: no query here.
        cached = ApiKey.workspace.is_cached(key)  # type: ignore[attr-defined]
        return key.workspace.slug if cached else None
    named = request.META.get(WORKSPACE_META) or (
        request.META.get("QUERY_STRING") and request.GET.get("workspace")
    )
    if named:
        return named[:64]
    match = getattr(request, "resolver_match", None)
    slug = match.kwargs.get("slug") if match is not None else None
    return slug if isinstance(slug, str) else None


def agent_of(key: ApiKey | None) -> str | None:
    """An agent key's agent, loaded with the key by authentication: no query here."""
    if key is None or key.kind != ApiKey.Kind.AGENT:
        return None
    cached = ApiKey.agent.is_cached(key)  # type: ignore[attr-defined]
    return key.agent.name if cached and key.agent is not None else None


def agent_answered(response: HttpResponse) -> str | None:
    if not 200 <= response.status_code < 300:
        return None  # a refusal names others (the holder of a lease, say)
    data: Any = getattr(response, "data", None)  # a DRF answer keeps what it rendered
    if not isinstance(data, dict):
        return None
    agent = data.get("agent")
    if agent is None and isinstance(data.get("session"), dict):
        agent = data["session"].get("agent")
    return agent if isinstance(agent, str) else None


class RequestLogMiddleware:
    """Outermost: it times the whole stack and sees the status the client gets."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_of(request)
        request.request_id = request_id  # type: ignore[attr-defined]
        token = current_request_id.set(request_id)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            duration = time.perf_counter() - started
            response[REQUEST_ID_HEADER] = request_id
            self.record(request, response, duration)
        finally:
            current_request_id.reset(token)
        return response

    def record(self, request: HttpRequest, response: HttpResponse, duration: float) -> None:
        route = route_of(request)
        method = request.method or ""
        status = response.status_code
        metrics.observe_request(method, route, status, duration)
        if not logger.isEnabledFor(logging.INFO):
            return
        auth = getattr(request, "auth", None)
        key = auth if isinstance(auth, ApiKey) else None
        fields = {
            "event": "request",
            "method": method,
            "path": request.path,
            "route": route,
            "status": status,
            "duration_ms": round(duration * 1000, 2),
            "workspace": workspace_named(request, key),
            "key": key.pk if key is not None else None,
            "agent": agent_of(key) or agent_answered(response),
        }
        logger.info(
            "%s %s %s %.1fms route=%s workspace=%s key=%s agent=%s",
            method,
            request.path,
            status,
            duration * 1000,
            route,
            fields["workspace"] or "-",
            fields["key"] or "-",
            fields["agent"] or "-",
            extra={"fields": fields},
        )
