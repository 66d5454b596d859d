"""The MCP server (the official ``mcp`` SDK's low-level ``Server``) and its HTTP entry.

Served statelessly with JSON responses: every HTTP request runs the SDK's own
Streamable HTTP handling (``StreamableHTTPSessionManager`` in stateless mode)
from start to end, so no MCP session outlives a request and any app server of a
load-balanced fleet can answer any request. Both protocol eras the SDK speaks
are served: the ``initialize`` handshake and the per-request envelope.
"""

import json
from collections.abc import MutableMapping
from functools import cache
from typing import Any

import anyio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError

from coordination.mcp import rest, whoami
from coordination.mcp.schemas import input_schemas
from coordination.tools import TOOLS, TOOLS_BY_NAME

# The key of the ASGI scope's "state" under which the view passes its Django
# request, whose Authorization header (and host, address) each tool call reuses.
DJANGO_REQUEST = "django_request"


def instructions() -> str:
    ttl = settings.PROJEKTOR_SESSION_TTL_SECONDS
    return (
        "Projektor coordinates many coding agents on one codebase. Call get_workflow first: "
        "it gives the issue states, the allowed transitions, the definition of ready, the "
        "human gates and the report rules. Find work with get_ready_issues (list_issues and "
        "get_issue read any issue; create_issue and update_issue file and edit them). Then "
        "take the issue by either route, both of which end in in_review: "
        "(1) start_work (opens a session, leases the issue, claims the files and moves a todo "
        "issue to in_progress, all or nothing), do the work, then finish_work; "
        "(2) register_agent, claim_issue, claim_files, then transition_issue to in_progress, "
        "do the work, then finish_work. finish_work moves the issue to in_review (with a "
        "report {summary, verification} once it was leased), releases its file claims and "
        "lease and ends the session. Meanwhile call heartbeat_agent well within the "
        f"{ttl}-second session TTL, or your lease and file claims may be reclaimed by others; "
        "claim files before editing them (a path ending in / claims a whole directory; no "
        "globs) and respect a file_conflict (it names the holder; check_files asks without "
        "claiming, list_file_claims shows who holds what; post_message to coordinate). "
        "Hold what no path names (a test database, ports) with acquire_resource and "
        "release_resource; list_resources shows who holds it. Where the project lands "
        "through its landing queue, queue_landing your branch under your lease and wait for "
        "landing.landed (then finish_work) or landing.rejected (give the issue back); "
        "list_landings shows the queue. To stop without "
        "finishing: release_files, release_issue, end_agent. While you work, call "
        "list_events with session=<your session id> and wait=30 (pass back its next as "
        "after): a lease.released or claims.released event naming your session with reason "
        "expired or overridden means another agent took your issue or files (data.by names "
        "it); stop and re-claim or coordinate. whoami names your workspace and what your "
        "key may do: an agent key acts only as its agent, in its sessions (register_agent "
        "and start_work may omit agent), and a call it may not make is a forbidden error. "
        "An agent started by `projektor run` (the agent command, served at /agent/projektor) "
        "has its session kept alive, its work handed in or given back, and is stopped when "
        "its work is taken: it need not heartbeat itself. "
        "A refused call is a tool error whose text is the REST error JSON: "
        '{"code": ..., "detail": ...}.'
    )


@cache
def tool_list() -> list[types.Tool]:
    schemas = input_schemas()
    rest_tools = [
        types.Tool(
            name=tool.name,
            description=f"{tool.description} (REST: {tool.method} {tool.path})",
            input_schema=schemas[tool.name],
            annotations=types.ToolAnnotations(read_only_hint=tool.method == "GET"),
        )
        for tool in TOOLS
    ]
    own = types.Tool(
        name=whoami.NAME,
        description=whoami.DESCRIPTION,
        input_schema=whoami.INPUT_SCHEMA,
        annotations=types.ToolAnnotations(read_only_hint=True),
    )
    return [*rest_tools, own]


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    # Building the OpenAPI document imports and inspects views: not in the event loop.
    return types.ListToolsResult(tools=await sync_to_async(tool_list)())


def django_request_of(ctx: ServerRequestContext[Any]) -> HttpRequest:
    state = getattr(ctx.request, "scope", {}).get("state", {})
    request = state.get(DJANGO_REQUEST)
    if not isinstance(request, HttpRequest):
        raise MCPError(code=types.INTERNAL_ERROR, message="No HTTP request to act for.")
    return request


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    tool = TOOLS_BY_NAME.get(params.name)
    if tool is None and params.name != whoami.NAME:
        # Not a tool error but a protocol one (the spec's "Unknown tool" example).
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
    outer = django_request_of(ctx)
    arguments = params.arguments or {}
    # The REST view runs on the request's own thread (thread-sensitive): the ORM is
    # sync-only and keeps its connection (and any transaction) per thread.
    if tool is None:
        answer = await sync_to_async(whoami.answer)(arguments, outer)
    else:
        answer = await sync_to_async(rest.call)(tool, arguments, outer)
    text = answer.content.decode("utf-8") or "null"
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=body if isinstance(body, dict) else None,
        is_error=answer.is_error,
    )


@cache
def mcp_server() -> Server[Any]:
    return Server(
        "projektor",
        version=str(settings.SPECTACULAR_SETTINGS["VERSION"]),
        title="Projektor",
        description="Issue tracker and coordination layer for fleets of coding agents.",
        instructions=instructions(),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def handle_http(
    request: HttpRequest, body: bytes
) -> tuple[int, list[tuple[str, str]], bytes]:
    """Answer one HTTP request with the SDK's Streamable HTTP transport.

    ``request`` is translated to an ASGI scope (its body is ``body``, already
    read); the ASGI response messages are collected and returned as
    ``(status, headers, body)``. A fresh stateless session manager per request
    is the SDK's stateless mode taken literally: nothing is shared between
    requests but the ``Server`` and its handlers.
    """
    scope = asgi_scope(request)
    delivered = False
    answered = anyio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # the client stays connected until it has its answer
        return {"type": "http.disconnect"}

    status: int | None = None
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            headers.extend(
                (name.decode("latin-1"), value.decode("latin-1"))
                for name, value in message.get("headers", [])
            )
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    # No Host/Origin checks in the SDK (security_settings=None): Django has checked
    # the host against ALLOWED_HOSTS, and a web page cannot send another origin's
    # Authorization header without CORS, which Projektor does not grant.
    manager = StreamableHTTPSessionManager(app=mcp_server(), json_response=True, stateless=True)
    async with manager.run():
        await manager.handle_request(scope, receive, send)
    if status is None:
        error = {"code": "server_error", "detail": "The MCP transport gave no answer."}
        return 500, [("content-type", "application/json")], json.dumps(error).encode()
    return status, headers, b"".join(chunks)


def asgi_scope(request: HttpRequest) -> dict[str, Any]:
    """The ASGI HTTP scope of a Django request (plus the request itself, in ``state``)."""
    meta = request.META
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": meta.get("QUERY_STRING", "").encode("latin-1"),
        "headers": [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in request.headers.items()
        ],
        "client": (meta.get("REMOTE_ADDR", ""), _port(meta.get("REMOTE_PORT"))),
        "server": (meta.get("SERVER_NAME", ""), _port(meta.get("SERVER_PORT"))),
        "state": {DJANGO_REQUEST: request},
    }


def _port(value: Any) -> int:
    return int(value) if str(value).isdigit() else 0
