"""Keys over the API: who am I, minting (the raw key once), listing (never a raw key or
hash), revoking and expiring (401 at once), and no key seeing or revoking another
workspace's keys (invariants 9 (workspace isolation) and 13 (the key is the actor))."""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.models import Agent, ApiKey, hash_api_key
from coordination.services import keys
from tests.api_helpers import V1, assert_error, post
from tests.conftest import make_client

pytestmark = pytest.mark.django_db


def test_an_orchestrator_mints_an_agent_key_the_agent_works_with_it_then_it_is_revoked(
    api, workspace, issue
):
    expires = (timezone.now() + timedelta(hours=8)).isoformat()
    minted = post(
        api,
        "/keys/",
        {"name": "coder-7", "kind": "agent", "agent": "coder-7", "expires_at": expires},
    )
    assert minted.status_code == 201, minted.content
    body = minted.json()
    raw = body.pop("key")
    assert raw.startswith(ApiKey.PREFIX) and body["prefix"] == raw[:10]
    assert (body["kind"], body["agent"], body["can_force"]) == ("agent", "coder-7", False)
    assert body["workspace"] == "acme" and body["revoked_at"] is None and body["expires_at"]
    key = ApiKey.objects.get(pk=body["id"])
    assert key.key_hash == hash_api_key(raw) and Agent.objects.filter(name="coder-7").exists()

    agent = make_client(raw)
    me = agent.get(f"{V1}/keys/me/").json()
    assert (me["kind"], me["agent"], me["workspace_name"]) == ("agent", "coder-7", "Acme")
    started = post(agent, "/work/start/", {"issue": issue.pk})
    assert started.status_code == 201 and started.json()["session"]["agent"] == "coder-7"

    revoked = post(api, f"/keys/{key.pk}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    assert_error(agent.get(f"{V1}/keys/me/"), 401, "unauthenticated")
    first = ApiKey.objects.get(pk=key.pk).revoked_at
    assert post(api, f"/keys/{key.pk}/revoke/").json()["revoked_at"] == revoked.json()["revoked_at"]
    assert ApiKey.objects.get(pk=key.pk).revoked_at == first


def test_minting_defaults_and_refusals(api):
    fleet = post(api, "/keys/", {"name": "ci"}).json()
    assert (fleet["kind"], fleet["agent"], fleet["can_force"]) == ("fleet", None, True)
    forcing = post(api, "/keys/", {"name": "a", "kind": "agent", "agent": "x", "can_force": True})
    assert forcing.json()["can_force"] is True
    read = post(api, "/keys/", {"name": "dash", "kind": "read"}).json()
    assert (read["kind"], read["can_force"]) == ("read", False)
    count = ApiKey.objects.count()
    past = (timezone.now() - timedelta(minutes=1)).isoformat()
    for body, field in (
        ({"name": "a", "kind": "agent"}, "agent"),
        ({"name": "f", "agent": "x"}, "agent"),
        ({"name": "r", "kind": "read", "can_force": True}, "can_force"),
        ({"name": "p", "expires_at": past}, "expires_at"),
        ({"name": "k", "kind": "admin"}, "kind"),
    ):
        refused = assert_error(post(api, "/keys/", body), 400, "invalid")
        assert refused.get("field") == field or field in refused.get("errors", {}), refused
    assert ApiKey.objects.count() == count


def test_the_list_filters_and_never_shows_a_secret(api, workspace):
    keys.mint_key(workspace=workspace, name="a", kind="agent", agent_name="coder-1")
    gone, _ = keys.mint_key(workspace=workspace, name="b", kind="agent", agent_name="coder-2")
    keys.revoke_key(workspace=workspace, key_id=gone.pk)
    keys.mint_key(workspace=workspace, name="c", kind="read")
    listed = api.get(f"{V1}/keys/").json()
    assert listed["count"] == 4  # and the fleet key the client holds
    assert [k["name"] for k in listed["results"]] == ["c", "b", "a", "fleet"]  # newest first
    for shown in listed["results"]:
        assert "key" not in shown and "key_hash" not in shown
        assert not any(isinstance(v, str) and len(v) == 64 for v in shown.values())

    def names(query: str) -> list[str]:
        response = api.get(f"{V1}/keys/?{query}")
        assert response.status_code == 200, response.content
        return [k["name"] for k in response.json()["results"]]

    assert names("kind=agent") == ["b", "a"]
    assert names("agent=coder-1") == ["a"]
    assert names("revoked=true") == ["b"]
    assert names("revoked=false&kind=agent") == ["a"]
    assert_error(api.get(f"{V1}/keys/?revoked=maybe"), 400, "invalid")


def test_an_expired_key_is_401_from_its_expiry_on(workspace):
    key, raw = keys.mint_key(
        workspace=workspace, kind="read", expires_at=timezone.now() + timedelta(hours=1)
    )
    client = make_client(raw)
    assert client.get(f"{V1}/issues/").status_code == 200
    ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert_error(client.get(f"{V1}/issues/"), 401, "unauthenticated")


def test_no_key_sees_or_revokes_another_workspaces_keys(api, stranger_api, other_workspace):
    theirs, raw = keys.mint_key(
        workspace=other_workspace, name="their agent", kind="agent", agent_name="x"
    )
    mine = api.get(f"{V1}/keys/").json()["results"]
    assert [k["workspace"] for k in mine] == ["acme"]
    assert_error(post(api, f"/keys/{theirs.pk}/revoke/"), 404, "not_found")
    assert ApiKey.objects.get(pk=theirs.pk).revoked_at is None
    assert make_client(raw).get(f"{V1}/keys/me/").status_code == 200
    # Their fleet key sees their keys only, and minting makes a key of their workspace.
    listed = stranger_api.get(f"{V1}/keys/").json()["results"]
    assert {k["workspace"] for k in listed} == {"globex"} and len(listed) == 2
    made = post(stranger_api, "/keys/", {"name": "n", "kind": "agent", "agent": "coder-1"})
    assert made.json()["workspace"] == "globex"
    assert not Agent.objects.filter(workspace__slug="acme", name="coder-1").exists()


def test_any_key_may_revoke_itself_but_only_a_fleet_key_another(api, workspace):
    agent_key, agent_raw = keys.mint_key(workspace=workspace, kind="agent", agent_name="coder-1")
    other, _ = keys.mint_key(workspace=workspace, kind="agent", agent_name="coder-2")
    agent = make_client(agent_raw)
    assert_error(post(agent, f"/keys/{other.pk}/revoke/"), 403, "forbidden")
    assert_error(agent.get(f"{V1}/keys/"), 403, "forbidden")
    assert_error(post(agent, "/keys/", {"name": "more"}), 403, "forbidden")
    assert ApiKey.objects.get(pk=other.pk).revoked_at is None
    assert post(agent, f"/keys/{agent_key.pk}/revoke/").status_code == 200
    assert_error(agent.get(f"{V1}/keys/me/"), 401, "unauthenticated")
