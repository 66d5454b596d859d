"""The HTTP server's floor, for the reference calls: a WSGI app that answers every
request with the bytes Projektor's ``GET /healthz`` answers (status, headers, body) and
does nothing else.

gunicorn serves it as it serves Projektor (the same worker, thread and settings) to the
same client, so its CPU per request is what gunicorn, the kernel's loopback and the
interpreter cost a call before any code of Projektor or Django runs: what a reference
call costs above it is the app's. ``tests/benchmarks/test_floor.py`` holds its answer to
the real one's.
"""

from collections.abc import Callable, Iterable
from typing import Any

from projektor.operations.health import HEALTHZ_BODY

STATUS = "200 OK"
HEADERS = [
    ("Content-Type", "application/json"),
    ("Content-Length", str(len(HEALTHZ_BODY))),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("X-Request-ID", "0" * 32),  # a fresh one's length
]


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response(STATUS, HEADERS)
    return [HEALTHZ_BODY]
