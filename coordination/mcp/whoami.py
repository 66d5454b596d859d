"""``whoami``: the caller's key and its workspace, answered by the endpoint itself.

Every other tool is a REST call; no REST route shows a key to its holder yet, so
this one answers from the key the ``/mcp`` request authenticated with (the view
let no request without one through). It reads nothing more: the authentication
loaded the key with its workspace.
"""

import json
from collections.abc import Mapping
from typing import Any

from django.http import HttpRequest
from rest_framework.exceptions import NotAuthenticated, ValidationError
from rest_framework.fields import DateTimeField

from coordination.mcp.rest import RestAnswer, refusal
from coordination.models import ApiKey

NAME = "whoami"
DESCRIPTION = (
    "Who is calling: this API key's id, name and prefix, and its workspace (slug and "
    "name). Every tool acts in that workspace, for any of its agents."
)
INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def answer(arguments: Mapping[str, Any], outer: HttpRequest) -> RestAnswer:
    """The key of ``outer`` as JSON; an argument is refused as a body field would be."""
    key = getattr(outer, "auth", None)
    if not isinstance(key, ApiKey):
        return refusal(NotAuthenticated("No API key authenticated this call."))
    if arguments:
        return refusal(
            ValidationError({name: ["whoami takes no arguments."] for name in arguments})
        )
    body = {
        "id": key.pk,
        "name": key.name,
        "prefix": key.key_prefix,
        "workspace": key.workspace.slug,
        "workspace_name": key.workspace.name,
        "created_at": DateTimeField().to_representation(key.created_at),
    }
    return RestAnswer(200, json.dumps(body).encode())
