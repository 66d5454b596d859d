"""The key is the actor (invariant 13 (the key is the actor)): the agent an agent key acts as, the
session it acts in, what it may force and close; a fleet key, a person and a read key; a
refusal was never an attempt, and leaves every coordination table as it was."""

import pytest
from rest_framework.test import APIClient

from coordination.api import access
from coordination.models import (
    AgentSession,
    ClaimConflict,
    Event,
    FileClaim,
    Message,
    Project,
    WipCapDenial,
)
from coordination.services import file_claims, keys, leases
from tests.api_helpers import V1, assert_error, post
from tests.conftest import make_client
from tests.coordination.api.access_helpers import (
    World,
    snapshot,
)

pytestmark = pytest.mark.django_db


# --- the actor is derived from an agent key -------------------------------------------------


def agent_client(world: World, persona: str = "agent_own") -> APIClient:
    return make_client(world.raw[persona])


def test_an_agent_key_registers_as_its_agent_and_the_session_records_the_key(world):
    client = agent_client(world)
    response = post(client, "/sessions/", {"role": "builder"})
    assert response.status_code == 201, response.content
    assert response.json()["agent"] == "alpha"
    session = AgentSession.objects.get(pk=response.json()["id"])
    assert session.api_key_id == world.key_ids["agent_own"]
    # Its own name may be given; another is 403 and registers nothing.
    assert post(client, "/sessions/", {"agent": "alpha"}).status_code == 201
    count = AgentSession.objects.count()
    assert_error(post(client, "/sessions/", {"agent": "beta"}), 403, "forbidden")
    assert AgentSession.objects.count() == count


def test_a_fleet_key_still_names_the_agent(world):
    fleet = make_client(world.raw["fleet"])
    body = assert_error(post(fleet, "/sessions/", {}), 400, "invalid")
    assert body["field"] == "agent"
    response = post(fleet, "/sessions/", {"agent": "gamma"})
    assert response.status_code == 201
    assert AgentSession.objects.get(pk=response.json()["id"]).api_key_id == world.key_ids["fleet"]


def test_start_work_with_an_agent_key_needs_no_agent_name(world):
    response = post(agent_client(world), "/work/start/", {"issue": world.free_issue})
    assert response.status_code == 201, response.content
    started = response.json()
    assert started["session"]["agent"] == "alpha" and started["message"]["agent"] == "alpha"
    session = AgentSession.objects.get(pk=started["session"]["id"])
    assert session.api_key_id == world.key_ids["agent_own"]


def test_a_message_of_an_agent_key_is_signed_by_its_agent(world):
    response = post(agent_client(world), "/messages/", {"scope": "agent:beta", "body": "Hi."})
    assert response.status_code == 201, response.content
    assert response.json()["agent"] == "alpha" and response.json()["session"] is None
    posted = Event.objects.filter(type="message.posted").latest("pk")
    assert posted.agent.name == "alpha"  # type: ignore[union-attr]
    # A fleet key without a session signs nothing, as before.
    fleet = post(
        make_client(world.raw["fleet"]), "/messages/", {"scope": "agent:beta", "body": "x"}
    )
    assert fleet.json()["agent"] is None


def test_an_agent_key_names_the_session_of_its_file_claims(world):
    client = agent_client(world)
    for url, body in (
        ("/file-claims/", {"issue": world.alpha.issue, "paths": ["src/x.py"]}),
        ("/file-claims/release/", {"issue": world.alpha.issue}),
    ):
        before = snapshot()
        refused = assert_error(post(client, url, body), 400, "invalid")
        assert refused["detail"].startswith("session: With an agent key"), refused
        assert "session" in refused["errors"]
        assert snapshot() == before


def test_a_refusal_was_never_an_attempt(world):
    """What the service would have logged, had it run: no conflict row, no WIP denial."""
    client = agent_client(world)
    # beta's session claiming alpha's file: without the check, a conflict row and event.
    claim = {"issue": world.beta.issue, "paths": [world.alpha.path], "session": world.beta.session}
    assert_error(post(client, "/file-claims/", claim), 403, "forbidden")
    assert not ClaimConflict.objects.exists()
    assert not Event.objects.filter(type="claims.refused").exists()
    # The same claim by beta's fleet-keyed self is a conflict, and is logged.
    fleet = make_client(world.raw["fleet"])
    assert_error(post(fleet, "/file-claims/", claim), 409, "file_conflict")
    assert ClaimConflict.objects.count() == 1
    # A project at its cap: beta's session claiming would be a WIP denial.
    Project.objects.filter(key="core").update(agent_wip_limit=2)
    lease = {"session": world.beta.session}
    assert_error(post(client, f"/issues/{world.free_issue}/claim/", lease), 403, "forbidden")
    assert not WipCapDenial.objects.exists()
    assert_error(post(fleet, f"/issues/{world.free_issue}/claim/", lease), 409, "wip_limit_reached")
    assert WipCapDenial.objects.count() == 1


def test_an_agent_key_moves_any_issue_but_closes_only_what_no_other_agent_holds(world):
    client = agent_client(world)
    to_todo = post(client, f"/issues/{world.beta.issue}/transition/", {"to": "todo"})
    assert to_todo.status_code == 200, to_todo.content
    assert_error(
        post(client, f"/issues/{world.beta.issue}/transition/", {"to": "cancelled"}),
        403,
        "forbidden",
    )
    # Once beta has let go, alpha's key may cancel it.
    leases.release_issue(
        workspace=world.workspace, issue_id=world.beta.issue, session_id=world.beta.session
    )
    file_claims.release_files(
        workspace=world.workspace, issue_id=world.beta.issue, session_id=world.beta.session
    )
    cancelled = post(client, f"/issues/{world.beta.issue}/transition/", {"to": "cancelled"})
    assert cancelled.status_code == 200, cancelled.content


def test_a_status_that_is_no_status_is_a_400_for_an_agent_key_too(world):
    # The permission layer reads ``to`` before the view validates it: any JSON value.
    client = agent_client(world)
    for to in ({"a": 1}, ["done"], 3, None):
        for path, body in (
            (f"/issues/{world.beta.issue}/transition/", {"to": to}),
            (
                "/work/finish/",
                {"session": world.alpha.session, "issue": world.beta.issue, "to": to},
            ),
        ):
            assert_error(post(client, path, body), 400, "invalid")


def test_a_fleet_key_minted_without_force_may_not_force_nor_mint_one_that_may(world):
    key, raw = keys.mint_key(workspace=world.workspace, name="careful", can_force=False)
    client = make_client(raw)
    claim = {"issue": world.alpha.issue, "paths": [world.beta.path], "session": world.alpha.session}
    before = snapshot()
    assert_error(post(client, "/file-claims/", {**claim, "force": True}), 403, "forbidden")
    assert_error(post(client, "/keys/", {"name": "x"}), 403, "forbidden")  # a fleet key forces
    assert snapshot() == before
    assert_error(post(client, "/file-claims/", claim), 409, "file_conflict")  # no force: tried
    minted = post(client, "/keys/", {"name": "x", "can_force": False})
    assert minted.status_code == 201 and minted.json()["can_force"] is False


def test_a_person_acts_as_a_fleet_key(world, alice):
    client = APIClient()
    client.force_login(alice)
    headers = {"X-Projektor-Workspace": "acme"}
    response = client.post(
        f"{V1}/projects/", {"key": "mine", "name": "Mine"}, format="json", headers=headers
    )
    assert response.status_code == 201, response.content
    assert client.get(f"{V1}/keys/", headers=headers).status_code == 200
    assert_error(client.get(f"{V1}/keys/me/", headers=headers), 401, "unauthenticated")


def test_a_read_key_reads_checks_and_revokes_only_itself(world):
    reader = make_client(world.raw["read"])
    before = snapshot()
    assert_error(post(reader, f"/keys/{world.key_ids['fleet']}/revoke/"), 403, "forbidden")
    assert snapshot() == before
    check = post(
        reader, "/file-claims/check/", {"issue": world.alpha.issue, "paths": [world.beta.path]}
    )
    assert check.status_code == 200 and check.json()["conflicts"][0]["agent"] == "beta"
    assert post(reader, f"/keys/{world.key_ids['read']}/revoke/").status_code == 200
    assert_error(reader.get(f"{V1}/issues/"), 401, "unauthenticated")


def test_a_claim_of_another_agent_leaves_its_claims_alone(world):
    """An agent key releasing with beta's session is refused; with its own, only its own."""
    client = agent_client(world)
    release = {"issue": world.beta.issue, "session": world.beta.session}
    assert_error(post(client, "/file-claims/release/", release), 403, "forbidden")
    assert FileClaim.objects.filter(path=world.beta.path, released_at__isnull=True).exists()
    own = post(
        client, "/file-claims/release/", {"issue": world.beta.issue, "session": world.alpha.session}
    )
    assert own.status_code == 200 and own.json()["released"] == []
    assert Message.objects.count() == 2  # nothing announced either


def test_a_route_without_a_rule_is_refused_to_all_but_fleet_keys(world, monkeypatch):
    monkeypatch.delitem(access.RULES, ("workflow", "GET"))
    for persona, status in (("fleet", 200), ("agent_own", 403), ("read", 403)):
        response = make_client(world.raw[persona]).get(f"{V1}/workflow/")
        assert response.status_code == status, (persona, response.content)


def test_a_method_a_route_lacks_is_405_and_options_a_read_for_every_key(world):
    reader = make_client(world.raw["read"])
    assert_error(reader.delete(f"{V1}/sessions/{world.alpha.session}/"), 405, "method_not_allowed")
    assert reader.options(f"{V1}/file-claims/release/").status_code == 200
