"""The key is the actor (invariant 13): every API route and every MCP tool, against five
callers, with the status each must get; every refusal leaves the database as it was.

The callers (``PERSONAS``): a fleet key; the agent key of ``alpha`` acting in alpha's
own session (it may force); the same key naming ``beta``'s session, run, issue or
name; alpha's agent key minted without ``can_force``, forcing where a call can; and a
read key. Fleet, own, no-force and read callers name alpha's objects; the other
caller names beta's. The routes come from the URL resolver and the tools from the MCP
table: a route or tool without an expectation here, or without a rule in
coordination/api/access.py, fails the test, so none can be forgotten.

A refusal is 403 ``forbidden``, and every row of every coordination table (the logs
and the event log included) is what it was before the call.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.apps import apps
from django.test import Client
from django.urls import resolve, reverse
from rest_framework.test import APIClient

from coordination.api import access
from coordination.mcp import whoami
from coordination.mcp.tools import TOOLS, ToolSpec
from coordination.models import (
    AgentSession,
    ApiKey,
    ClaimConflict,
    Event,
    FileClaim,
    Issue,
    IssueLease,
    IssueLink,
    Message,
    Project,
    WipCapDenial,
    Workspace,
)
from coordination.services import (
    agents,
    file_claims,
    keys,
    leases,
    messages,
    runs,
    webhooks,
    workflow,
    worktrees,
)
from tests.api_helpers import V1, assert_error, post
from tests.conftest import make_client
from tests.coordination.api.test_auth import ROUTES

pytestmark = pytest.mark.django_db

PERSONAS = ("fleet", "agent_own", "agent_other", "agent_no_force", "read")
OK, CREATED, GONE, NO = 200, 201, 204, 403


# --- the world ------------------------------------------------------------------------


@dataclass
class Side:
    """What a caller names: a session, its issue (leased, holding a claim), its run,
    a key, an agent name."""

    session: int
    issue: int
    run: int
    key: int
    agent: str
    path: str


@dataclass
class World:
    workspace: Workspace
    alpha: Side
    beta: Side
    free_issue: int
    ids: dict[str, int]
    raw: dict[str, str] = field(default_factory=dict)  # persona -> raw key
    key_ids: dict[str, int] = field(default_factory=dict)

    def side(self, persona: str) -> Side:
        side = self.beta if persona == "agent_other" else self.alpha
        # A key route names the caller's own key (beta's side: another, spare key).
        own_key = self.key_ids[persona] if persona != "agent_other" else self.beta.key
        return Side(side.session, side.issue, side.run, own_key, side.agent, side.path)


def build_world(workspace: Workspace) -> World:
    worktrees.create_worktree(workspace=workspace, slug="wt-main", name="Main")
    project = Project.objects.create(
        workspace=workspace, key="core", name="Core", agent_wip_limit=10
    )

    def issue(title: str) -> Issue:
        return Issue.objects.create(
            workspace=workspace,
            project=project,
            title=title,
            description="Done when it works.",
            status=Issue.Status.TODO,
        )

    sides = {}
    for name in ("alpha", "beta"):
        session = agents.register_session(workspace=workspace, agent_name=name)
        held = issue(f"{name}'s issue")
        leases.claim_issue(workspace=workspace, issue_id=held.pk, session_id=session.pk)
        workflow.transition_issue(
            workspace=workspace, issue_id=held.pk, to="in_progress", by_human=False
        )
        path = f"src/{name}.py"
        file_claims.claim_files(
            workspace=workspace, issue_id=held.pk, paths=[path], session_id=session.pk
        )
        run = runs.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=held.pk)
        messages.post_message(
            workspace=workspace,
            scope=f"issue:{held.pk}",
            body=f"{name} here",
            session_id=session.pk,
        )
        spare, _ = ApiKey.issue(workspace, f"spare of {name}")
        sides[name] = Side(session.pk, held.pk, run.pk, spare.pk, name, path)
    free = issue("free issue")
    hook = webhooks.create_webhook(workspace=workspace, url="http://93.184.216.34/hook")
    webhooks.enqueue(hook.pk)
    world = World(
        workspace=workspace,
        alpha=sides["alpha"],
        beta=sides["beta"],
        free_issue=free.pk,
        ids={
            "projects": project.pk,
            "webhooks": hook.pk,
            "links": IssueLink.objects.create(
                workspace=workspace, source=free, type="relates_to", target_id=sides["alpha"].issue
            ).pk,
        },
    )
    minted = {
        "fleet": keys.mint_key(workspace=workspace, name="fleet"),
        "agent_own": keys.mint_key(
            workspace=workspace, name="alpha", kind="agent", agent_name="alpha", can_force=True
        ),
        "agent_no_force": keys.mint_key(
            workspace=workspace, name="alpha, no force", kind="agent", agent_name="alpha"
        ),
        "read": keys.mint_key(workspace=workspace, name="dashboard", kind="read"),
    }
    minted["agent_other"] = minted["agent_own"]  # the same key, naming beta's objects
    for persona, (key, raw) in minted.items():
        world.raw[persona], world.key_ids[persona] = raw, key.pk
    return world


# --- each route's call, and what each caller gets ---------------------------------------


@dataclass(frozen=True)
class Call:
    pk: int | None = None
    body: dict[str, Any] | None = None
    link: int | None = None  # a second id in the path


REPORT = {"summary": "Done.", "verification": "Tests pass."}

# (route name, method) -> the call, from the world and the side the caller names.
CALLS: dict[tuple[str, str], Callable[[World, Side], Call]] = {
    ("session-list", "GET"): lambda w, s: Call(),
    ("session-list", "POST"): lambda w, s: Call(body={"agent": s.agent}),
    ("session-detail", "GET"): lambda w, s: Call(s.session),
    ("session-heartbeat", "POST"): lambda w, s: Call(s.session, {}),
    ("session-progress", "POST"): lambda w, s: Call(s.session, {}),
    ("session-end", "POST"): lambda w, s: Call(s.session, {}),
    ("project-list", "GET"): lambda w, s: Call(),
    ("project-list", "POST"): lambda w, s: Call(body={"key": "new", "name": "New"}),
    ("project-detail", "GET"): lambda w, s: Call(w.ids["projects"]),
    ("project-detail", "PATCH"): lambda w, s: Call(w.ids["projects"], {"agent_wip_limit": 99}),
    ("issue-list", "GET"): lambda w, s: Call(),
    ("issue-list", "POST"): lambda w, s: Call(body={"project": "core", "title": "New"}),
    ("issue-ready", "GET"): lambda w, s: Call(),
    ("issue-detail", "GET"): lambda w, s: Call(s.issue),
    ("issue-detail", "PATCH"): lambda w, s: Call(s.issue, {"title": "Renamed"}),
    # Cancelling releases the issue's lease and claims: beta's, for the other caller.
    ("issue-transition", "POST"): lambda w, s: Call(s.issue, {"to": "cancelled"}),
    ("issue-claim", "POST"): lambda w, s: Call(w.free_issue, {"session": s.session}),
    ("issue-release", "POST"): lambda w, s: Call(s.issue, {"session": s.session}),
    ("issue-links", "POST"): lambda w, s: Call(w.free_issue, {"type": "blocks", "target": s.issue}),
    ("issue-link", "DELETE"): lambda w, s: Call(w.free_issue, link=w.ids["links"]),
    ("lease-list", "GET"): lambda w, s: Call(),
    ("lease-detail", "GET"): lambda w, s: Call(lease_of(s.issue)),
    ("wip-cap-denial-list", "GET"): lambda w, s: Call(),
    ("workflow", "GET"): lambda w, s: Call(),
    ("worktree-list", "GET"): lambda w, s: Call(),
    ("worktree-list", "POST"): lambda w, s: Call(body={"slug": "wt-new", "name": "New"}),
    ("run-list", "GET"): lambda w, s: Call(),
    ("run-list", "POST"): lambda w, s: Call(body={"session": s.session, "issue": w.free_issue}),
    ("run-detail", "GET"): lambda w, s: Call(s.run),
    ("run-finish", "POST"): lambda w, s: Call(s.run, {"outcome": "succeeded"}),
    ("file-claim-list", "GET"): lambda w, s: Call(),
    # Forcing the path the other agent holds (alpha's issue takes beta's file).
    ("file-claim-list", "POST"): lambda w, s: Call(
        body={"issue": w.alpha.issue, "paths": [w.beta.path], "session": s.session, "force": True}
    ),
    ("file-claim-detail", "GET"): lambda w, s: Call(claim_of(s.issue)),
    ("file-claim-release", "POST"): lambda w, s: Call(
        body={"issue": s.issue, "paths": [s.path], "session": s.session}
    ),
    ("file-claim-check", "POST"): lambda w, s: Call(
        body={"issue": w.alpha.issue, "paths": [w.beta.path]}
    ),
    ("claim-conflict-list", "GET"): lambda w, s: Call(),
    ("heatmap", "GET"): lambda w, s: Call(),
    ("message-list", "GET"): lambda w, s: Call(),
    ("message-list", "POST"): lambda w, s: Call(
        body={"scope": f"issue:{s.issue}", "body": "Hello.", "session": s.session}
    ),
    ("events", "GET"): lambda w, s: Call(),
    ("events-stream", "GET"): lambda w, s: Call(),
    ("work-start", "POST"): lambda w, s: Call(
        body={"agent": s.agent, "issue": w.free_issue, "paths": ["src/new.py"]}
    ),
    ("work-finish", "POST"): lambda w, s: Call(
        body={"session": s.session, "issue": s.issue, "report": REPORT}
    ),
    ("webhook-list", "GET"): lambda w, s: Call(),
    ("webhook-list", "POST"): lambda w, s: Call(body={"url": "http://93.184.216.34/other"}),
    ("webhook-detail", "GET"): lambda w, s: Call(w.ids["webhooks"]),
    ("webhook-detail", "PATCH"): lambda w, s: Call(w.ids["webhooks"], {"active": False}),
    ("webhook-detail", "DELETE"): lambda w, s: Call(w.ids["webhooks"]),
    ("webhook-deliveries", "GET"): lambda w, s: Call(w.ids["webhooks"]),
    ("key-me", "GET"): lambda w, s: Call(),
    ("key-list", "GET"): lambda w, s: Call(),
    ("key-list", "POST"): lambda w, s: Call(body={"name": "new", "kind": "read"}),
    ("key-revoke", "POST"): lambda w, s: Call(s.key, {}),
}


def lease_of(issue: int) -> int:
    return IssueLease.objects.get(issue_id=issue, released_at__isnull=True).pk


def claim_of(issue: int) -> int:
    return FileClaim.objects.get(issue_id=issue, released_at__isnull=True).pk


def everyone(status: int) -> tuple[int, ...]:
    """A read, or a call that changes nothing: every caller may."""
    return (status,) * 5


def as_an_agent(status: int) -> tuple[int, ...]:
    """Acts in a session, as an agent: not in another agent's, and never a read key."""
    return (status, status, NO, status, NO)


def tracking(status: int) -> tuple[int, ...]:
    """Issues: any key that writes."""
    return (status, status, status, status, NO)


def fleet_only(status: int) -> tuple[int, ...]:
    return (status, NO, NO, NO, NO)


# (route name, method) -> the status of each of PERSONAS.
EXPECTED: dict[tuple[str, str], tuple[int, ...]] = {
    ("session-list", "GET"): everyone(OK),
    ("session-list", "POST"): as_an_agent(CREATED),
    ("session-detail", "GET"): everyone(OK),
    ("session-heartbeat", "POST"): as_an_agent(OK),
    ("session-progress", "POST"): as_an_agent(OK),
    ("session-end", "POST"): as_an_agent(OK),
    ("project-list", "GET"): everyone(OK),
    ("project-list", "POST"): fleet_only(CREATED),
    ("project-detail", "GET"): everyone(OK),
    ("project-detail", "PATCH"): fleet_only(OK),
    ("issue-list", "GET"): everyone(OK),
    ("issue-list", "POST"): tracking(CREATED),
    ("issue-ready", "GET"): everyone(OK),
    ("issue-detail", "GET"): everyone(OK),
    ("issue-detail", "PATCH"): tracking(OK),
    ("issue-transition", "POST"): as_an_agent(OK),  # closing what beta holds: refused
    ("issue-claim", "POST"): as_an_agent(CREATED),
    ("issue-release", "POST"): as_an_agent(OK),
    ("issue-links", "POST"): tracking(CREATED),
    ("issue-link", "DELETE"): tracking(GONE),
    ("lease-list", "GET"): everyone(OK),
    ("lease-detail", "GET"): everyone(OK),
    ("wip-cap-denial-list", "GET"): everyone(OK),
    ("workflow", "GET"): everyone(OK),
    ("worktree-list", "GET"): everyone(OK),
    ("worktree-list", "POST"): fleet_only(CREATED),
    ("run-list", "GET"): everyone(OK),
    ("run-list", "POST"): as_an_agent(CREATED),
    ("run-detail", "GET"): everyone(OK),
    ("run-finish", "POST"): as_an_agent(OK),
    ("file-claim-list", "GET"): everyone(OK),
    ("file-claim-list", "POST"): (CREATED, CREATED, NO, NO, NO),  # force needs can_force
    ("file-claim-detail", "GET"): everyone(OK),
    ("file-claim-release", "POST"): as_an_agent(OK),
    ("file-claim-check", "POST"): everyone(OK),
    ("claim-conflict-list", "GET"): everyone(OK),
    ("heatmap", "GET"): everyone(OK),
    ("message-list", "GET"): everyone(OK),
    ("message-list", "POST"): as_an_agent(CREATED),
    ("events", "GET"): everyone(OK),
    ("events-stream", "GET"): everyone(OK),
    ("work-start", "POST"): as_an_agent(CREATED),
    ("work-finish", "POST"): as_an_agent(OK),
    ("webhook-list", "GET"): fleet_only(OK),
    ("webhook-list", "POST"): fleet_only(CREATED),
    ("webhook-detail", "GET"): fleet_only(OK),
    ("webhook-detail", "PATCH"): fleet_only(OK),
    ("webhook-detail", "DELETE"): fleet_only(GONE),
    ("webhook-deliveries", "GET"): fleet_only(OK),
    ("key-me", "GET"): everyone(OK),
    ("key-list", "GET"): fleet_only(OK),
    ("key-list", "POST"): fleet_only(CREATED),
    # Each caller revokes itself; the other caller names a spare key.
    ("key-revoke", "POST"): (OK, OK, NO, OK, OK),
}

ROUTE_KEYS = sorted({(route.name, route.method.upper()) for route in ROUTES})
CASES = [(route, persona) for route in ROUTE_KEYS for persona in PERSONAS]


def test_every_route_has_an_expectation_a_call_and_a_rule():
    assert set(EXPECTED) == set(ROUTE_KEYS), set(EXPECTED) ^ set(ROUTE_KEYS)
    assert set(CALLS) == set(ROUTE_KEYS)
    assert set(access.RULES) == set(ROUTE_KEYS), set(access.RULES) ^ set(ROUTE_KEYS)
    assert all(len(statuses) == len(PERSONAS) for statuses in EXPECTED.values())


def test_every_mcp_tool_has_a_route_with_an_expectation():
    for tool in (*TOOLS, whoami.CALL):
        assert route_of_tool(tool) in EXPECTED, tool.name


def snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row of every coordination table, the logs and the event log among them."""
    return {
        model._meta.label: list(model._default_manager.order_by("pk").values())
        for model in apps.get_app_config("coordination").get_models()
    }


@pytest.fixture
def world(workspace: Workspace, settings: Any) -> World:
    settings.PROJEKTOR_EVENT_STREAM_SECONDS = 0  # the stream's first frame, then its end
    return build_world(workspace)


def rest_call(world: World, route: tuple[str, str], persona: str) -> Any:
    name, method = route
    call = CALLS[route](world, world.side(persona))
    kwargs = {"pk": call.pk} if call.pk is not None else {}
    url = reverse(name, kwargs={**kwargs, "link": call.link} if call.link else kwargs)
    client: APIClient = make_client(world.raw[persona])
    if method == "GET":
        return client.get(url)
    return getattr(client, method.lower())(url, call.body or {}, format="json")


@pytest.mark.parametrize(
    ("route", "persona"), CASES, ids=lambda v: "-".join(v) if isinstance(v, tuple) else v
)
def test_each_route_answers_each_caller_as_expected(world, route, persona):
    expected = EXPECTED[route][PERSONAS.index(persona)]
    before = snapshot()
    response = rest_call(world, route, persona)
    assert response.status_code == expected, (route, persona, response.content[:400])
    if expected == NO:
        body = response.json()
        assert body["code"] == "forbidden" and body["detail"], body
        assert snapshot() == before, "a refusal changed the database"


# --- the MCP tools: the same rules, through the same layer --------------------------------


def route_of_tool(tool: ToolSpec) -> tuple[str, str]:
    match = resolve(tool.path.replace("{id}", "1").replace("{link}", "1"))
    return str(match.url_name), tool.method


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
