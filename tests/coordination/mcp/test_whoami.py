"""``whoami``: the caller's key and workspace, from the key the request came with (its
REST call, ``GET /keys/me/``): a fleet key, and an agent key with its agent."""

import pytest

from coordination.models import ApiKey
from coordination.services import keys
from tests.coordination.mcp.conftest import call, connect, refused, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_whoami_names_the_key_and_its_workspace(mcp_url, raw_key, other_workspace):
    _, theirs = ApiKey.issue(other_workspace, "their fleet")
    key = ApiKey.objects.get(key_prefix=raw_key[:10])

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            tool = {t.name: t for t in (await client.list_tools()).tools}["whoami"]
            assert tool.input_schema["properties"] == {} and tool.annotations.read_only_hint
            me = await call(client, "whoami")
            assert {k: v for k, v in me.items() if k != "created_at"} == {
                "id": key.pk,
                "name": "fleet",
                "prefix": raw_key[:10],
                "kind": "fleet",
                "agent": None,
                "can_force": True,
                "workspace": "acme",
                "workspace_name": "Acme",
                "expires_at": None,
                "revoked_at": None,
            }
            assert me["created_at"].endswith("Z")

            extra = await refused(client, "whoami", workspace="globex")
            assert extra["code"] == "invalid" and "workspace" in extra["errors"]
        async with connect(mcp_url, theirs) as client:
            assert (await call(client, "whoami"))["workspace"] == "globex"
        async with connect(mcp_url, agents_key) as client:
            me = await call(client, "whoami")
            assert (me["kind"], me["agent"], me["can_force"]) == ("agent", "coder-1", False)

    _, agents_key = keys.mint_key(workspace=key.workspace, kind="agent", agent_name="coder-1")
    run(scenario)
