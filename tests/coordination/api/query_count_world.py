"""The world and the calls of ``test_query_counts``: ``rows`` of every kind, with every
relation a serializer reads filled in, and for each state change it pins, the call
to send on that world."""

from dataclasses import dataclass
from typing import Any

import pytest

from coordination.errors import FileConflict, WipLimitReached
from coordination.models import AgentSession, Issue, Project, Workspace, Worktree
from coordination.services import agents, file_claims, keys, leases, messages, resources, runs


@dataclass
class World:
    """``rows`` of every kind, with every relation a serializer reads filled in."""

    workspace: Workspace
    project: Project
    rows: int
    sessions: list[AgentSession]
    leased: list[Issue]  # issue i leased by session i, running, holding src/<i>.py
    ready: list[Issue]
    backlog: list[Issue]

    def paths(self, prefix: str) -> list[str]:
        return [f"{prefix}/{i}.py" for i in range(self.rows)]


def build_world(workspace: Workspace, rows: int) -> World:
    trees = [
        Worktree.objects.create(workspace=workspace, slug=f"wt-{i}", name=f"Tree {i}")
        for i in range(rows)
    ]
    project = Project.objects.create(
        workspace=workspace, key="core", name="Core", agent_wip_limit=1000
    )
    for i, tree in enumerate(trees):
        Project.objects.create(
            workspace=workspace, key=f"p-{i}", name=f"P {i}", primary_worktree=tree
        )
    sessions = [
        agents.register_session(
            workspace=workspace,
            agent_name=f"agent-{i}",
            role="builder",
            department="core",
            worktree_slug=f"wt-{i}",
        )
        for i in range(rows)
    ]

    def issue(i: int, kind: str, status: str) -> Issue:
        return Issue.objects.create(
            workspace=workspace,
            project=project,
            title=f"{kind} {i}",
            description="Done when it works.",
            status=status,
            priority=Issue.Priority.HIGH,
            worktree=trees[i],
            assignee=sessions[i].agent,
            report={"summary": "s", "verification": "v"},
        )

    leased = [issue(i, "leased", Issue.Status.IN_PROGRESS) for i in range(rows)]
    ready = [issue(i, "ready", Issue.Status.TODO) for i in range(rows)]
    backlog = [issue(i, "backlog", Issue.Status.BACKLOG) for i in range(rows)]
    for i, (session, held) in enumerate(zip(sessions, leased, strict=True)):
        runs.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=held.pk)
        file_claims.claim_files(
            workspace=workspace,
            issue_id=held.pk,
            paths=[f"src/{i}.py", f"tree/{i}/"],  # a file and a directory claim each
            session_id=session.pk,
        )
        messages.post_message(
            workspace=workspace, scope=f"issue:{held.pk}", body="On it.", session_id=session.pk
        )
    # A resource each session holds a unit of, with one unit left.
    resources.create_resource(workspace=workspace, name="db:test", capacity=rows + 1)
    for session in sessions:
        resources.acquire(workspace=workspace, name="db:test", session_id=session.pk)
    # A rival refused on every held path: one conflict per path.
    rival = issue(0, "rival", Issue.Status.TODO)
    with pytest.raises(FileConflict):
        file_claims.claim_files(
            workspace=workspace,
            issue_id=rival.pk,
            paths=[f"src/{i}.py" for i in range(rows)],
            session_id=sessions[0].pk,
        )
    # A project capped at one lease, refusing every session: one denial each.
    capped = Project.objects.create(workspace=workspace, key="capped", name="C", agent_wip_limit=1)
    wanted = [
        Issue.objects.create(workspace=workspace, project=capped, title=f"capped {i}")
        for i in range(rows + 1)
    ]
    leases.claim_issue(workspace=workspace, issue_id=wanted[0].pk, session_id=sessions[0].pk)
    for session, refused in zip(sessions, wanted[1:], strict=True):
        with pytest.raises(WipLimitReached):
            leases.claim_issue(workspace=workspace, issue_id=refused.pk, session_id=session.pk)
    return World(workspace, project, rows, sessions, leased, ready, backlog)


@dataclass
class Call:
    method: str
    url: str
    body: dict[str, Any]
    status: int


def fence_of(issue: Issue) -> int:
    return issue.leases.get(released_at__isnull=True).fence


def claim(world: World, issue: Issue, paths: list[str]) -> None:
    file_claims.claim_files(
        workspace=world.workspace,
        issue_id=issue.pk,
        paths=paths,
        session_id=world.sessions[0].pk,
    )


def register(w: World) -> Call:
    return Call("POST", "/sessions/", {"agent": "newcomer", "worktree": "wt-0"}, 201)


def heartbeat(w: World) -> Call:
    return Call("POST", f"/sessions/{w.sessions[0].pk}/heartbeat/", {}, 200)


def end_session(w: World) -> Call:
    claim(w, w.leased[0], w.paths("end"))  # a lease, a run's lock and rows + 1 claims
    return Call("POST", f"/sessions/{w.sessions[0].pk}/end/", {}, 200)


def lease_claim(w: World) -> Call:
    return Call("POST", f"/issues/{w.ready[0].pk}/claim/", {"session": w.sessions[0].pk}, 201)


def lease_claim_held(w: World) -> Call:
    return Call("POST", f"/issues/{w.leased[0].pk}/claim/", {"session": w.sessions[0].pk}, 200)


def lease_release(w: World) -> Call:
    return Call("POST", f"/issues/{w.leased[0].pk}/release/", {"session": w.sessions[0].pk}, 200)


def lease_release_fenced(w: World) -> Call:
    body = {"session": w.sessions[0].pk, "fence": fence_of(w.leased[0])}
    return Call("POST", f"/issues/{w.leased[0].pk}/release/", body, 200)


def files_claim(w: World) -> Call:
    body = {"issue": w.leased[0].pk, "session": w.sessions[0].pk, "paths": w.paths("new")}
    return Call("POST", "/file-claims/", body, 201)


def files_claim_fenced(w: World) -> Call:
    body = {
        "issue": w.leased[0].pk,
        "session": w.sessions[0].pk,
        "paths": w.paths("new"),
        "fence": fence_of(w.leased[0]),
    }
    return Call("POST", "/file-claims/", body, 201)


def files_conflict(w: World) -> Call:
    body = {"issue": w.ready[0].pk, "session": w.sessions[0].pk, "paths": w.paths("src")}
    return Call("POST", "/file-claims/", body, 409)


def files_claim_directories(w: World) -> Call:
    # Beside the world's directories and files, none overlapping: however many.
    body = {
        "issue": w.leased[0].pk,
        "session": w.sessions[0].pk,
        "paths": [f"new/{i}/" for i in range(w.rows)],
    }
    return Call("POST", "/file-claims/", body, 201)


def files_directory_conflict(w: World) -> Call:
    # One directory over every world row's directory and file: rows conflicts.
    body = {"issue": w.ready[0].pk, "session": w.sessions[0].pk, "paths": ["tree/", "src/"]}
    return Call("POST", "/file-claims/", body, 409)


def files_directory_force(w: World) -> Call:
    # One holder of every file under the directory: told once, whatever their number.
    claim(w, w.leased[1], w.paths("held"))
    body = {"issue": w.ready[0].pk, "session": w.sessions[0].pk, "paths": ["held/"], "force": True}
    return Call("POST", "/file-claims/", body, 201)


def files_force(w: World) -> Call:
    # One holder of every path: the override tells each holder (issue and agent) once.
    claim(w, w.leased[1], w.paths("held"))
    body = {
        "issue": w.ready[0].pk,
        "session": w.sessions[0].pk,
        "paths": w.paths("held"),
        "force": True,
    }
    return Call("POST", "/file-claims/", body, 201)


def files_release(w: World) -> Call:
    claim(w, w.leased[0], w.paths("rel"))
    body = {"issue": w.leased[0].pk, "session": w.sessions[0].pk, "paths": w.paths("rel")}
    return Call("POST", "/file-claims/release/", body, 200)


def files_release_all(w: World) -> Call:
    claim(w, w.leased[0], w.paths("rel"))
    return Call("POST", "/file-claims/release/", {"issue": w.leased[0].pk}, 200)


def files_check(w: World) -> Call:
    return Call(
        "POST", "/file-claims/check/", {"issue": w.ready[0].pk, "paths": w.paths("src")}, 200
    )


def files_check_directories(w: World) -> Call:
    # A file under each world row's directory claim: rows conflicts.
    paths = [f"tree/{i}/deep/x.py" for i in range(w.rows)]
    return Call("POST", "/file-claims/check/", {"issue": w.ready[0].pk, "paths": paths}, 200)


def start_work(w: World) -> Call:
    body = {"agent": "starter", "worktree": "wt-0", "issue": w.ready[0].pk, "paths": w.paths("go")}
    return Call("POST", "/work/start/", body, 201)


def finish_work(w: World) -> Call:
    claim(w, w.leased[0], w.paths("done"))
    body = {
        "session": w.sessions[0].pk,
        "issue": w.leased[0].pk,
        "report": {"summary": "Done.", "verification": "Tests."},
        "fence": fence_of(w.leased[0]),
    }
    return Call("POST", "/work/finish/", body, 200)


def message_post(w: World) -> Call:
    body = {"scope": f"issue:{w.leased[0].pk}", "body": "Halfway.", "session": w.sessions[0].pk}
    return Call("POST", "/messages/", body, 201)


def run_dispatch(w: World) -> Call:
    free = Worktree.objects.create(workspace=w.workspace, slug="free", name="Free")
    Issue.objects.filter(pk=w.ready[0].pk).update(worktree=free)
    return Call("POST", "/runs/", {"session": w.sessions[0].pk, "issue": w.ready[0].pk}, 201)


def run_finish(w: World) -> Call:
    run = w.leased[0].runs.get()
    body = {"outcome": "succeeded", "fence": run.locks.get().fence}
    return Call("POST", f"/runs/{run.pk}/finish/", body, 200)


def issue_create(w: World) -> Call:
    body = {"project": "core", "title": "New", "worktree": "wt-0", "assignee": "agent-0"}
    return Call("POST", "/issues/", body, 201)


def issue_update(w: World) -> Call:
    return Call("PATCH", f"/issues/{w.leased[0].pk}/", {"title": "Renamed"}, 200)


def issue_transition(w: World) -> Call:
    return Call("POST", f"/issues/{w.backlog[0].pk}/transition/", {"to": "todo"}, 200)


def project_create(w: World) -> Call:
    return Call(
        "POST", "/projects/", {"key": "new", "name": "New", "primary_worktree": "wt-0"}, 201
    )


def project_update(w: World) -> Call:
    return Call("PATCH", f"/projects/{w.project.pk}/", {"name": "Renamed"}, 200)


def worktree_create(w: World) -> Call:
    return Call("POST", "/worktrees/", {"slug": "new", "name": "New"}, 201)


def resource_acquire(w: World) -> Call:
    newcomer = agents.register_session(workspace=w.workspace, agent_name="newcomer")
    return Call("POST", "/resources/db:test/acquire/", {"session": newcomer.pk}, 201)


def resource_acquire_busy(w: World) -> Call:
    last = agents.register_session(workspace=w.workspace, agent_name="last")
    resources.acquire(workspace=w.workspace, name="db:test", session_id=last.pk)
    late = agents.register_session(workspace=w.workspace, agent_name="late")
    return Call("POST", "/resources/db:test/acquire/", {"session": late.pk}, 409)


def resource_release(w: World) -> Call:
    return Call("POST", "/resources/db:test/release/", {"session": w.sessions[0].pk}, 200)


STATE_CHANGES = {
    "POST /resources/{name}/acquire/": resource_acquire,
    "POST /resources/{name}/acquire/ (busy)": resource_acquire_busy,
    "POST /resources/{name}/release/": resource_release,
    "POST /sessions/": register,
    "POST /sessions/{id}/heartbeat/": heartbeat,
    "POST /sessions/{id}/end/": end_session,
    "POST /issues/{id}/claim/": lease_claim,
    "POST /issues/{id}/claim/ (held)": lease_claim_held,
    "POST /issues/{id}/release/": lease_release,
    "POST /issues/{id}/release/ (fence)": lease_release_fenced,
    "POST /file-claims/": files_claim,
    "POST /file-claims/ (fence)": files_claim_fenced,
    "POST /file-claims/ (conflict)": files_conflict,
    "POST /file-claims/ (force)": files_force,
    "POST /file-claims/ (directories)": files_claim_directories,
    "POST /file-claims/ (directory conflict)": files_directory_conflict,
    "POST /file-claims/ (directory force)": files_directory_force,
    "POST /file-claims/release/": files_release,
    "POST /file-claims/release/ (all)": files_release_all,
    "POST /file-claims/check/": files_check,
    "POST /file-claims/check/ (directories)": files_check_directories,
    "POST /work/start/": start_work,
    "POST /work/finish/": finish_work,
    "POST /messages/": message_post,
    "POST /runs/": run_dispatch,
    "POST /runs/{id}/finish/": run_finish,
    "POST /issues/": issue_create,
    "PATCH /issues/{id}/": issue_update,
    "POST /issues/{id}/transition/": issue_transition,
    "POST /projects/": project_create,
    "PATCH /projects/{id}/": project_update,
    "POST /worktrees/": worktree_create,
}


# --- with an agent key (invariant 13 (the key is the actor))
# ----------------------------------------------------- agent-0's own key, acting in agent-0's
# session (sessions[0]); it may force.


def agent_register(w: World) -> Call:
    return Call("POST", "/sessions/", {}, 201)


def agent_message(w: World) -> Call:
    return Call("POST", "/messages/", {"scope": f"issue:{w.leased[0].pk}", "body": "Hi."}, 201)


AS_AGENT = {
    "POST /sessions/ (agent key)": agent_register,
    "POST /sessions/{id}/heartbeat/ (agent key)": heartbeat,
    "POST /issues/{id}/claim/ (agent key)": lease_claim,
    "POST /file-claims/ (agent key)": files_claim,
    "POST /file-claims/ (agent key, force)": files_force,
    "POST /file-claims/release/ (agent key)": files_release,
    "POST /messages/ (agent key)": agent_message,
    "POST /work/start/ (agent key)": lambda w: Call(
        "POST", "/work/start/", {"issue": w.ready[0].pk, "paths": w.paths("go")}, 201
    ),
}


# --- keys --------------------------------------------------------------------------------


def key_calls(w: World, api_key_id: int) -> dict[str, Call]:
    spare, _ = keys.mint_key(workspace=w.workspace, name="spare", kind="read")
    return {
        "GET /keys/me/": Call("GET", "/keys/me/", {}, 200),
        "GET /keys/": Call("GET", "/keys/", {}, 200),
        "POST /keys/": Call("POST", "/keys/", {"name": "n", "kind": "agent", "agent": "x"}, 201),
        "POST /keys/{id}/revoke/": Call("POST", f"/keys/{spare.pk}/revoke/", {}, 200),
    }


KEY_CALLS = ["GET /keys/me/", "GET /keys/", "POST /keys/", "POST /keys/{id}/revoke/"]
