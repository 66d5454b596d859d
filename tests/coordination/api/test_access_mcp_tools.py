"""The key is the actor (invariant 13 (the key is the actor)), through MCP: every tool answers each
of the five callers (``PERSONAS``) as its route does, through the same permission layer;
every refused tool call leaves the database as it was. A tool whose route has no
expectation fails the test."""

import json
from typing import Any

import pytest
from django.test import Client

from coordination.mcp import whoami
from coordination.tools import TOOLS, ToolSpec
from tests.coordination.api.access_helpers import (
    CALLS,
    EXPECTED,
    NO,
    PERSONAS,
    Call,
    World,
    route_of_tool,
    snapshot,
)

pytestmark = pytest.mark.django_db


# --- the MCP tools: the same rules, through the same layer --------------------------------


def test_every_mcp_tool_has_a_route_with_an_expectation():
    for tool in (*TOOLS, whoami.CALL):
        assert route_of_tool(tool) in EXPECTED, tool.name


def tool_arguments(tool: ToolSpec, call: Call) -> dict[str, Any]:
    arguments: dict[str, Any] = {} if tool.method == "GET" else dict(call.body or {})
    if tool.url_id is not None:
        arguments[tool.url_id] = call.pk
    for name in tool.path_ids.values():
        arguments[name] = call.link
    return arguments


MCP_CASES = [(tool.name, persona) for tool in (*TOOLS, whoami.CALL) for persona in PERSONAS]
TOOLS_BY_NAME = {tool.name: tool for tool in (*TOOLS, whoami.CALL)}


def mcp_call(world: World, tool: ToolSpec, persona: str) -> dict[str, Any]:
    route = route_of_tool(tool)
    arguments = tool_arguments(tool, CALLS[route](world, world.side(persona)))
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool.name, "arguments": arguments},
    }
    answer = Client().post(
        "/mcp",
        message,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {world.raw[persona]}",
        HTTP_ACCEPT="application/json, text/event-stream",
    )
    assert answer.status_code == 200, answer.content
    result: dict[str, Any] = answer.json()["result"]
    return result


@pytest.mark.parametrize(("tool", "persona"), MCP_CASES, ids=lambda v: v)
def test_each_mcp_tool_answers_each_caller_as_its_route_does(world, tool, persona):
    spec = TOOLS_BY_NAME[tool]
    expected = EXPECTED[route_of_tool(spec)][PERSONAS.index(persona)]
    before = snapshot()
    result = mcp_call(world, spec, persona)
    text = result["content"][0]["text"]
    if expected == NO:
        assert result["isError"] is True, text
        error = json.loads(text)
        assert error["code"] == "forbidden" and error["detail"], error
        assert snapshot() == before, "a refused tool call changed the database"
    else:
        assert result["isError"] is False, (tool, persona, text)
