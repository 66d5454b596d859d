"""Serve the pre-commit hook, so that a checkout on any machine can install it."""

from pathlib import Path

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

SCRIPT = Path(__file__).with_name("pre_commit.py")


@require_safe
def pre_commit(request: HttpRequest) -> HttpResponse:
    """The hook as plain text, byte for byte; no key needed, it holds no secret."""
    response = HttpResponse(SCRIPT.read_bytes(), content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = 'inline; filename="pre-commit"'
    return response
