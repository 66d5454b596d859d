"""``whoami``: the caller's key, as ``GET /keys/me/`` answers it.

A tool of its own only in refusing arguments (the REST call takes none, and a GET
would ignore a stray query parameter); otherwise it is that REST call, made
in-process like every tool, through the same permission layer (invariant 13 (the key is the actor)).
"""

from collections.abc import Mapping
from typing import Any

from django.http import HttpRequest
from rest_framework.exceptions import ValidationError

from coordination.mcp import rest
from coordination.tools import API, ToolSpec

NAME = "whoami"
DESCRIPTION = (
    "Who is calling: this API key's id, name, prefix and kind (fleet: acts for any agent; "
    "agent: only as its agent, named here; read: reads only), whether it may force, when it "
    "expires, and its workspace (slug and name). Every tool acts in that workspace."
)
INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
CALL = ToolSpec(NAME, "GET", f"{API}/keys/me/", DESCRIPTION)


def answer(arguments: Mapping[str, Any], outer: HttpRequest) -> rest.RestAnswer:
    """The key of ``outer`` as JSON; an argument is refused as a body field would be."""
    if arguments:
        return rest.refusal(
            ValidationError({name: ["whoami takes no arguments."] for name in arguments})
        )
    return rest.call(CALL, {}, outer)
