"""503 ``unavailable`` while the database cannot be reached (docs/design.md, error shape).

A request that meets a dead database (refused or terminated connection, a database
that accepts no connections, SQLite locked past its busy timeout) answers 503: JSON
``{"code": "unavailable", "detail": ...}`` under ``/api/`` and ``/mcp``, a short
page elsewhere, both with ``Retry-After``. Never Django's 500 page.

Two ways an error reaches this module:

- raised by a view (DRF's exception handler returns None for database errors, so
  DRF re-raises them): ``process_exception`` answers 503;
- raised by another middleware (a session saved in ``process_response``): Django
  turns it into a 500 at that layer and sends ``got_request_exception`` while the
  error is being handled; the receiver below marks the request, and ``__call__``
  replaces that 500 with the 503.

Recovery needs no restart. A database error marks the connection
(``errors_occurred``); when the request finishes Django tests it and closes it if it
is broken, and ``CONN_HEALTH_CHECKS`` tests a persistent connection before its first
use in each request, so a connection the server dropped between requests is
replaced instead of failing once.

Only errors about the database's availability count: an ``IntegrityError``, a
``ProgrammingError`` or a ``DataError`` is a bug or bad data and stays a 500.
SQLite reports programming mistakes ("no such table", syntax errors) as
``OperationalError`` too, so for SQLite only some messages count
(``coordination.unavailable``, which the MCP endpoint shares).
"""

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import got_request_exception
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from coordination.unavailable import UNAVAILABLE, is_database_unavailable

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
# Where every answer is JSON: the API, the MCP endpoint, the health and readiness probes.
JSON_PREFIXES = ("/api/", "/mcp", "/healthz", "/readyz")
MARK = "_projektor_database_unavailable"


def wants_json(request: HttpRequest) -> bool:
    return request.path.startswith(JSON_PREFIXES)


def unavailable_response(request: HttpRequest) -> HttpResponse:
    response: HttpResponse
    if wants_json(request):
        response = JsonResponse(UNAVAILABLE, status=503)
    else:
        # No request context: context processors would read the session and the user,
        # which live in the database that is down.
        response = HttpResponse(render_to_string("503.html"), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def mark_unavailable(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """``got_request_exception`` receiver: the error being handled is in sys.exc_info()."""
    if request is not None and is_database_unavailable(sys.exc_info()[1]):
        setattr(request, MARK, True)


got_request_exception.connect(mark_unavailable, dispatch_uid="projektor-database-unavailable")


class DatabaseUnavailableMiddleware:
    """Place it above every middleware that may touch the database (sessions, auth)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code == 500 and getattr(request, MARK, False):
            response = unavailable_response(request)
        if response.status_code == 503 and not response.has_header("Retry-After"):
            response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_database_unavailable(exception):
            return None
        logger.warning(
            "Database unavailable for %s %s: %s", request.method, request.path, exception
        )
        return unavailable_response(request)


# Served to keys and probes, never as a page: the API, MCP and the operations endpoints.
MACHINE_PREFIXES = ("/api/", "/mcp", "/healthz", "/readyz", "/metrics")


def is_machine_request(request: HttpRequest) -> bool:
    """A call under the machine prefixes that carries no session cookie. A request with
    the cookie (a logged-in browser calling the API) is a page's: the API accepts a
    session too, and then the user, and DRF's CSRF check, come from it."""
    return (
        request.path_info.startswith(MACHINE_PREFIXES)
        and settings.SESSION_COOKIE_NAME not in request.COOKIES
    )


# The view handler under the page-only middlewares, handed from the layer below them to
# the layer above while Django builds the stack (one thread builds one stack).
_below_pages = threading.local()


class PagesOnlyEnd:
    """Placed just below the page-only middlewares: it hands what is below them (the
    view) to ``PagesOnlyStart``, and passes the pages' requests on."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        _below_pages.handler = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)


class PagesOnlyStart:
    """Placed just above the page-only middlewares: sessions, CSRF, the user from the
    session, messages and clickjacking. A machine request goes from here straight to
    ``PagesOnlyEnd``'s handler, past them.

    An agent's call (a key, no cookie) uses none of them, and their five layers were a
    quarter of its cost. Django's own middlewares stay named in MIDDLEWARE, so its
    checks (admin, ``check --deploy``) still see them. ``process_view`` hooks are the
    handler's, not the stack's: CSRF's runs for every request, and refuses an unsafe
    method to a view that is not exempt, machine request or not, as before."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        below = getattr(_below_pages, "handler", None)
        if below is None:
            raise ImproperlyConfigured("PagesOnlyStart needs PagesOnlyEnd below it in MIDDLEWARE.")
        del _below_pages.handler
        self.below_pages = below

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_machine_request(request):
            return self.below_pages(request)
        return self.get_response(request)
