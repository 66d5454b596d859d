"""An MCP conversation with the live server through the official SDK's client,
bounded by TIMEOUT seconds."""

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from coordination.models import ApiKey, Workspace

TIMEOUT = 30  # seconds, for a whole test's MCP conversation


@pytest.fixture
def raw_key(workspace: Workspace) -> str:
    return ApiKey.issue(workspace, "fleet")[1]


@pytest.fixture
def mcp_url(live_server: Any) -> str:
    return f"{live_server.url}/mcp"


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(TIMEOUT):
            await scenario()

    anyio.run(bounded)


@asynccontextmanager
async def connect(url: str, key: str, *, initialize: bool = True) -> AsyncIterator[ClientSession]:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(TIMEOUT)
    )
    async with (
        http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session,
    ):
        if initialize:
            await session.initialize()
        yield session


async def call(client: ClientSession, tool: str, /, **arguments: Any) -> dict[str, Any]:
    """A tool call that must succeed; its structured result (the REST body)."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    [content] = result.content
    assert isinstance(content, types.TextContent)
    body: dict[str, Any] = json.loads(content.text)
    assert result.structured_content == body
    return body


async def refused(client: ClientSession, tool: str, /, **arguments: Any) -> dict[str, Any]:
    """A tool call that the REST API refuses: isError, its text the REST error JSON."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.content
    [content] = result.content
    assert isinstance(content, types.TextContent)
    error: dict[str, Any] = json.loads(content.text)
    assert error["code"] and error["detail"]
    return error
