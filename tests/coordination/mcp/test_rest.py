"""A tool call is its REST call, in-process: a crash still answers JSON, and the
call counts once against the key's rate."""

import json
from typing import Any

import pytest
from django.core.cache import caches
from django.db import OperationalError

from coordination.api.auth import ApiKeyAuthentication
from coordination.services import leases

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_crash_still_answers_json(client, raw_key, issue, monkeypatch):
    """In-process: the database going away mid-call, then before authentication."""

    def database_down(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("connection refused")

    headers = {
        "HTTP_AUTHORIZATION": f"Bearer {raw_key}",
        "HTTP_ACCEPT": "application/json, text/event-stream",
    }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "claim_issue", "arguments": {"issue": issue.pk, "session": 1}},
    }
    monkeypatch.setattr(leases, "claim_issue", database_down)
    answer = client.post("/mcp", message, content_type="application/json", **headers)
    assert answer.status_code == 200
    result = answer.json()["result"]
    assert result["isError"] is True
    assert json.loads(result["content"][0]["text"])["code"] == "unavailable"

    monkeypatch.setattr(ApiKeyAuthentication, "authenticate", database_down)
    answer = client.post("/mcp", message, content_type="application/json", **headers)
    assert answer.status_code == 503 and answer.json()["code"] == "unavailable"
    assert answer["Retry-After"]


def test_a_tool_call_counts_once_against_the_key_rate(client, raw_key, settings):
    """In-process: only REST calls count; over the limit, the tool error is `throttled`."""
    caches["throttle"].clear()
    rates = {"key": "3/hour", "anon": "120/hour"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    headers = {
        "HTTP_AUTHORIZATION": f"Bearer {raw_key}",
        "HTTP_ACCEPT": "application/json, text/event-stream",
    }

    def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = client.post("/mcp", message, content_type="application/json", **headers)
        assert answer.status_code == 200, answer.content
        result: dict[str, Any] = answer.json()["result"]
        return result

    workflow = {"name": "get_workflow", "arguments": {}}
    for _ in range(3):
        assert rpc("tools/list", {})["tools"]  # the protocol's own messages do not count
        assert rpc("tools/call", workflow)["isError"] is False
    throttled = rpc("tools/call", workflow)
    assert throttled["isError"] is True
    assert json.loads(throttled["content"][0]["text"])["code"] == "throttled"
    assert rpc("ping", {}) == {}
    caches["throttle"].clear()
