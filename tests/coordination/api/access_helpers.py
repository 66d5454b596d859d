"""The world of the permission tests (invariant 13 (the key is the actor)): two agents' sessions,
issues, runs and keys, the callers (``PERSONAS``), each route's call and the status each
caller must get; the snapshot of every coordination table a refusal must leave as it
was."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.urls import resolve

from coordination.models import ApiKey, FileClaim, Issue, IssueLease, IssueLink, Project, Workspace
from coordination.services import (
    agents,
    file_claims,
    keys,
    landings,
    leases,
    messages,
    resources,
    runs,
    webhooks,
    workflow,
    worktrees,
)
from coordination.tools import ToolSpec
from tests.coordination.api.test_auth import ROUTES

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
    landing_ids: dict[str, int] = {}
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
    for name in (RESOURCE, HELD_RESOURCE):
        resources.create_resource(workspace=workspace, name=name, capacity=10)
    for side in sides.values():
        resources.acquire(workspace=workspace, name=HELD_RESOURCE, session_id=side.session)
    # Each side's second issue, queued to land; alpha's session tests the batch of both.
    for side in sides.values():
        queued = issue(f"{side.agent}'s landing")
        claimed = leases.claim_issue(
            workspace=workspace, issue_id=queued.pk, session_id=side.session
        )
        entry = landings.queue_landing(
            workspace=workspace,
            issue_id=queued.pk,
            session_id=side.session,
            branch=f"{side.agent}-branch",
            commit="abcdef1",
            fence=claimed.lease.fence,
        )
        landing_ids[side.agent] = entry.pk
    batch = landings.take_batch(
        workspace=workspace, project_key="core", session_id=sides["alpha"].session
    )
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
            "landing:alpha": landing_ids["alpha"],
            "landing:beta": landing_ids["beta"],
            "batch": batch.fence or 0,
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
    pk: int | str | None = None  # a resource's URL names it
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
    ("resource-list", "GET"): lambda w, s: Call(),
    ("resource-list", "POST"): lambda w, s: Call(body={"name": "ports", "capacity": 8}),
    ("resource-detail", "GET"): lambda w, s: Call(RESOURCE),
    ("resource-detail", "PATCH"): lambda w, s: Call(RESOURCE, {"capacity": 12}),
    ("resource-acquire", "POST"): lambda w, s: Call(RESOURCE, {"session": s.session}),
    ("resource-release", "POST"): lambda w, s: Call(HELD_RESOURCE, {"session": s.session}),
    ("resource-hold-list", "GET"): lambda w, s: Call(),
    ("landing-list", "GET"): lambda w, s: Call(),
    ("landing-list", "POST"): lambda w, s: Call(
        body={
            "issue": s.issue,
            "session": s.session,
            "branch": "work",
            "commit": "abcdef2",
            "fence": lease_fence(s.issue),
        }
    ),
    ("landing-detail", "GET"): lambda w, s: Call(w.ids[f"landing:{s.agent}"]),
    ("landing-take", "POST"): lambda w, s: Call(body={"session": s.session, "project": "core"}),
    ("landing-land", "POST"): lambda w, s: Call(
        w.ids[f"landing:{s.agent}"],
        {"session": s.session, "fence": w.ids["batch"], "commit": "abcdef3"},
    ),
    ("landing-reject", "POST"): lambda w, s: Call(
        w.ids[f"landing:{s.agent}"],
        {"session": s.session, "fence": w.ids["batch"], "reason": "check_failed"},
    ),
    ("landing-return-batch", "POST"): lambda w, s: Call(
        body={"session": s.session, "fence": w.ids["batch"]}
    ),
}


RESOURCE = "db:test"
HELD_RESOURCE = "db:held"  # each side's session holds a unit of it


def lease_of(issue: int) -> int:
    return IssueLease.objects.get(issue_id=issue, released_at__isnull=True).pk


def lease_fence(issue: int) -> int:
    return IssueLease.objects.get(issue_id=issue, released_at__isnull=True).fence


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
    ("resource-list", "GET"): everyone(OK),
    ("resource-list", "POST"): fleet_only(CREATED),
    ("resource-detail", "GET"): everyone(OK),
    ("resource-detail", "PATCH"): fleet_only(OK),
    ("resource-acquire", "POST"): as_an_agent(CREATED),
    ("resource-release", "POST"): as_an_agent(OK),
    ("resource-hold-list", "GET"): everyone(OK),
    ("landing-list", "GET"): everyone(OK),
    ("landing-list", "POST"): as_an_agent(CREATED),
    ("landing-detail", "GET"): everyone(OK),
    ("landing-take", "POST"): as_an_agent(OK),
    ("landing-land", "POST"): as_an_agent(OK),
    ("landing-reject", "POST"): as_an_agent(OK),
    ("landing-return-batch", "POST"): as_an_agent(OK),
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


def snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row of every coordination table, the logs and the event log among them."""
    return {
        model._meta.label: list(model._default_manager.order_by("pk").values())
        for model in apps.get_app_config("coordination").get_models()
    }


def route_of_tool(tool: ToolSpec) -> tuple[str, str]:
    match = resolve(tool.path.replace("{id}", "1").replace("{link}", "1"))
    return str(match.url_name), tool.method
