"""Serve the ``projektor`` command, and the same file as the pre-commit hook (the
command named ``pre-commit`` is ``projektor guard pre-commit``), so that any machine
can install them; no key needed, neither holds a secret."""

import functools

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from coordination.guard import bundle


@require_safe
def pre_commit(request: HttpRequest) -> HttpResponse:
    """The hook: the ``projektor`` command, which runs the guard under this name."""
    response = HttpResponse(zipapp_bytes(), content_type="application/octet-stream")
    response["Content-Disposition"] = 'attachment; filename="pre-commit"'
    return response


@require_safe
def agent_command(request: HttpRequest) -> HttpResponse:
    """The command as one executable zipapp (``chmod +x`` it and run it)."""
    response = HttpResponse(zipapp_bytes(), content_type="application/octet-stream")
    response["Content-Disposition"] = 'attachment; filename="projektor"'
    return response


@functools.cache
def zipapp_bytes() -> bytes:
    # The package does not change while the process runs: built once per process.
    return bundle.zipapp()
