"""The active-request gate: the app server lets ``PROJEKTOR_ACTIVE_REQUESTS`` requests of a
process run at once, and a request that sleeps (``coordination.idle``: a long poll, a
call in a resource's line) gives its place up while it sleeps, so waiters do not take the
threads that heartbeats and claims need. gunicorn runs that many threads plus
``PROJEKTOR_WAITING_THREADS`` for the waiters (gunicorn.conf.py): past that many waiting
calls in one worker, each further waiter holds one of the working threads. Off (0, the default)
where every request has a thread of its own anyway: the development server, the tests.

Each thread that served a request that did not wait keeps its database connection, as
Django's persistent connections do: up to ``workers × (PROJEKTOR_THREADS +
PROJEKTOR_WAITING_THREADS)`` at the busiest, which PostgreSQL's ``max_connections`` must
allow (docs/operations.md).
"""

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.db import connections
from django.http import HttpRequest, HttpResponse

from coordination.idle import Gate


class ActiveRequestsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        active = settings.PROJEKTOR_ACTIVE_REQUESTS
        if not active:
            raise MiddlewareNotUsed
        self.get_response = get_response
        self.gate = Gate(active)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with self.gate.running() as place:
            response = self.get_response(request)
        # A waiter's thread keeps no connection between requests: the waiters' threads
        # would otherwise hold as many idle connections as there were waiters.
        if place.slept:
            connections.close_all()
        return response
