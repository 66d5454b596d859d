"""The ``/mcp`` view: keys, methods and body sizes answer JSON."""

import httpx2
import pytest
from django.utils import timezone
from mcp.shared.exceptions import MCPError

from coordination.models import ApiKey
from tests.coordination.mcp.conftest import TIMEOUT, connect, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_missing_wrong_or_revoked_key_is_401(mcp_url, workspace):
    key, raw = ApiKey.issue(workspace, "old")
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": f"Bearer {raw}"}):
        response = httpx2.post(
            mcp_url,
            json=initialize,
            headers={"Accept": "application/json, text/event-stream", **headers},
            timeout=TIMEOUT,
        )
        assert response.status_code == 401, response.text
        assert response.headers["content-type"].startswith("application/json")
        body = response.json()
        assert body["code"] == "unauthenticated" and body["detail"]

    async def scenario() -> None:
        # The SDK client reports the 401 as an error response to its initialize
        # (raised through the client's task groups).
        with pytest.raises(ExceptionGroup) as raised:
            async with connect(mcp_url, "nope"):
                pass
        assert raised.group_contains(MCPError, match="error response")

    run(scenario)


def test_other_methods_and_oversized_bodies_answer_json(mcp_url, raw_key):
    for method in ("GET", "DELETE", "PUT"):
        response = httpx2.request(
            method, mcp_url, headers={"Authorization": f"Bearer {raw_key}"}, timeout=TIMEOUT
        )
        assert response.status_code == 405, (method, response.text)
        assert response.json()["code"] == "method_not_allowed"
    # A client opening an SSE stream learns there is none: 405, still JSON.
    stream = httpx2.get(
        mcp_url,
        headers={"Authorization": f"Bearer {raw_key}", "Accept": "text/event-stream"},
        timeout=TIMEOUT,
    )
    assert stream.status_code == 405 and stream.json()["code"] == "method_not_allowed"
    assert httpx2.get(mcp_url, timeout=TIMEOUT).status_code == 401

    too_large = httpx2.post(
        mcp_url,
        content=b" " * (3 * 1024 * 1024),
        headers={"Authorization": f"Bearer {raw_key}", "Content-Type": "application/json"},
        timeout=TIMEOUT,
    )
    assert too_large.status_code == 413 and too_large.json()["code"] == "payload_too_large"
