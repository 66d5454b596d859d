"""The MCP tools: one row per tool, naming the REST call it makes.

Plain data, below both ``coordination.mcp``, which serves the tools, and
``coordination.api``, whose reference lists them: the API never imports MCP, which
stands above it (it calls the REST views).

A tool call is that REST call, made in-process (``coordination.mcp.rest``): the
same view, serializer, service and errors, so MCP and REST cannot drift. The
arguments are the REST body (or, for a GET, the query parameters), plus the URL
id under ``url_id`` where the path has one; the result is the REST response body.
The names are the bracketed ones of docs/api.md and those of docs/api.md "MCP".
``whoami`` is ``GET /keys/me/`` with a schema of its own (``coordination.mcp.whoami``).

A GET tool may give a query parameter a default the REST call lacks (``defaults``):
sent when the argument is absent; ``null`` sends no parameter, the REST default.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

API = "/api/v1"


@dataclass(frozen=True)
class ToolSpec:
    name: str
    method: Literal["GET", "POST", "PATCH", "DELETE"]
    path: str  # the REST path, as in the OpenAPI document ("{id}" for the URL id)
    description: str
    url_id: str | None = None  # the argument that fills "{id}"
    # That argument is a resource's name (a string), not a row id (an integer).
    url_id_is_name: bool = False
    # A second id in the path: its placeholder ("{link}") and the argument that fills it.
    path_ids: Mapping[str, str] = field(default_factory=dict, hash=False)
    # Fields of the REST body schema that the call refuses: not offered as arguments.
    omit: tuple[str, ...] = ()
    # Arguments sent when absent: where the seed's tool differs from the REST default.
    defaults: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if ("{id}" in self.path) != (self.url_id is not None):
            raise ValueError(f"{self.name}: url_id must be given exactly when the path has an id")
        if self.url_id_is_name and self.url_id is None:
            raise ValueError(f"{self.name}: url_id_is_name names the URL id")
        if self.defaults and self.method != "GET":
            raise ValueError(f"{self.name}: defaults are for a GET's query parameters")


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "register_agent",
        "POST",
        f"{API}/sessions/",
        "Open a session for an agent (the name is created or reused; role and department "
        "are updated when given; a worktree slug binds the agent). Returns the session: keep "
        "its id and heartbeat it before the TTL runs out.",
    ),
    ToolSpec(
        "heartbeat_agent",
        "POST",
        f"{API}/sessions/{{id}}/heartbeat/",
        "Keep a session live. 409 session_ended once it has ended.",
        url_id="session",
    ),
    ToolSpec(
        "report_progress",
        "POST",
        f"{API}/sessions/{{id}}/progress/",
        "Say the work moved (an optional note, at most 500 characters, shown on the agent's "
        "page). A session that is live but makes no progress for a while is stalled, shown to "
        "people; every change it makes counts too, a heartbeat does not. 409 session_ended "
        "once it has ended.",
        url_id="session",
    ),
    ToolSpec(
        "end_agent",
        "POST",
        f"{API}/sessions/{{id}}/end/",
        "End a session cleanly: its leases and file claims are released (agent_ended) and "
        "its worktree locks freed.",
        url_id="session",
    ),
    ToolSpec(
        "list_active_agents",
        "GET",
        f"{API}/sessions/",
        "List the live sessions (paginated): heartbeating within the TTL, not ended. "
        "live=false lists the others (ended, or stale: stopped heartbeating), live=null "
        "every session; filter by agent name or role.",
        # The seed: the TTL "decides when list_active_agents stops listing a session".
        defaults={"live": True},
    ),
    ToolSpec(
        "get_workflow",
        "GET",
        f"{API}/workflow/",
        "The workflow: states, allowed transitions, the definition of ready, the human "
        "gates and the report rules. Read it first.",
    ),
    ToolSpec(
        "list_issues",
        "GET",
        f"{API}/issues/",
        "List issues (paginated, 100 a page), newest first; filter by project key, status, "
        "and leased=true|false (whether a live session holds the issue). To pick work, "
        "get_ready_issues ranks the issues that are ready.",
    ),
    ToolSpec(
        "get_issue",
        "GET",
        f"{API}/issues/{{id}}/",
        "One issue: status, priority, description (what done means), worktree, assignee, "
        "its unreleased lease (holder and liveness) and its completion report.",
        url_id="issue",
    ),
    ToolSpec(
        "create_issue",
        "POST",
        f"{API}/issues/",
        "Create an issue in a project (by key). It starts in backlog, or in todo when asked "
        "and it meets the definition of ready (a title, and a description saying what done "
        "means: else invalid_transition with missing). Priority 0 none, 1 urgent ... 4 low; "
        "worktree is a slug, assignee an agent name.",
    ),
    ToolSpec(
        "update_issue",
        "PATCH",
        f"{API}/issues/{{id}}/",
        "Edit an issue: only the fields given change (title, description, priority, "
        "requires_filesystem, worktree slug, assignee agent name; null clears the last "
        "two). The status moves only through transition_issue; the project never changes.",
        url_id="issue",
        omit=("project", "status"),  # IssueInput.NOT_PATCHABLE: a 400 in a PATCH
    ),
    ToolSpec(
        "transition_issue",
        "POST",
        f"{API}/issues/{{id}}/transition/",
        "Move an issue along the workflow (get_workflow lists the moves): todo -> "
        "in_progress once you hold its lease (claim_issue); in_review or done need a "
        "completion report {summary, verification, pr_link?} once the issue was ever "
        "leased; done and cancelled release its lease and file claims. Errors: "
        "invalid_transition (with allowed or missing), forbidden where only a person may move "
        "it.",
        url_id="issue",
    ),
    ToolSpec(
        "claim_issue",
        "POST",
        f"{API}/issues/{{id}}/claim/",
        "Lease an issue for a live session (exclusive). Errors: lease_held (with the "
        "holder), wip_limit_reached, session_not_live.",
        url_id="issue",
    ),
    ToolSpec(
        "release_issue",
        "POST",
        f"{API}/issues/{{id}}/release/",
        "Release the session's lease on an issue. lease_not_held when it holds none.",
        url_id="issue",
    ),
    ToolSpec(
        "claim_files",
        "POST",
        f"{API}/file-claims/",
        "Claim 1-100 file paths for an issue before editing them, all or nothing. A path "
        "ending in / claims the directory and everything under it (src/api/ holds "
        "src/api/v2/x.py, not src/apiv2.py); globs (*, ?, [) are refused: claim the directory. "
        "A path overlapping another issue's live claim (the same path, a directory claim above "
        "it, or a claim under your directory) refuses the whole call with file_conflict, "
        "naming each holder and its held_path; force=true overrides the holders (they are "
        "told).",
    ),
    ToolSpec(
        "check_files",
        "POST",
        f"{API}/file-claims/check/",
        "Which of 1-1000 paths a claim by this issue would be refused on, with each holder "
        "and its held_path (a file under another issue's directory claim counts). Read-only: "
        "claims, logs and reclaims nothing. Ask before editing files you did not claim.",
    ),
    ToolSpec(
        "list_file_claims",
        "GET",
        f"{API}/file-claims/",
        "List file claims (paginated, newest first): active=true for the unreleased ones; "
        "filter by issue, session, path (exact; src/api/ is the directory claim), path_prefix "
        "(whole segments), covering (the claims that hold a path: itself and each directory "
        "claim above it) and release_reason. Shows who holds a file; claim_files itself "
        "refuses a held one.",
    ),
    ToolSpec(
        "release_files",
        "POST",
        f"{API}/file-claims/release/",
        "Release an issue's file claims: the given paths, or all of them; with session, "
        "only that session's. A path releases the claim spelled so: src/api/ the directory "
        "claim, never the claims under it.",
    ),
    ToolSpec(
        "get_code_heatmap",
        "GET",
        f"{API}/heatmap/",
        "Where agents work (mode=claims) or collide (mode=contention): event counts per "
        "path prefix in a time window.",
    ),
    ToolSpec(
        "post_message",
        "POST",
        f"{API}/messages/",
        "Post a message to a scope: issue:<id>, agent:<name> or project:<key>.",
    ),
    ToolSpec(
        "list_messages",
        "GET",
        f"{API}/messages/",
        "List messages (paginated), by scope and since; agent=<name> gives the messages to "
        "that agent and to the issues it holds.",
    ),
    ToolSpec(
        "dispatch",
        "POST",
        f"{API}/runs/",
        "Start a run of an issue for a session (claims the lease first if needed) and lock "
        "its worktree when it needs one. Errors: worktree_busy, worktree_unresolved and the "
        "lease errors.",
    ),
    ToolSpec(
        "dispatch_run",
        "POST",
        f"{API}/runs/",
        "Same as dispatch: start a run of an issue for a session.",
    ),
    ToolSpec(
        "finish_run",
        "POST",
        f"{API}/runs/{{id}}/finish/",
        "Finish a running run (succeeded or failed); its worktree lock is released.",
        url_id="run",
    ),
    ToolSpec(
        "acquire_resource",
        "POST",
        f"{API}/resources/{{id}}/acquire/",
        "Hold units of a resource that no path names (a test database, a pool of ports, the "
        "migration head) for a live session, by the resource's name: each unit a slot number "
        "in 0..capacity-1. Lives as a lease does: heartbeat, and release it when done. "
        "wait=1..60 waits in line, first come first served. Errors: resource_busy (with "
        "holders, available and waiting), session_not_live; holding it already gives that "
        "hold back.",
        url_id="name",
        url_id_is_name=True,
    ),
    ToolSpec(
        "release_resource",
        "POST",
        f"{API}/resources/{{id}}/release/",
        "Release the session's hold of a resource, by the resource's name (with fence: only "
        "while that hold is current). hold_not_held when it holds none.",
        url_id="name",
        url_id_is_name=True,
    ),
    ToolSpec(
        "list_resources",
        "GET",
        f"{API}/resources/",
        "List the workspace's resources by name (filter by name): each one's capacity, units "
        "in use (live holds only), available, the calls waiting and its live holders.",
    ),
    ToolSpec(
        "queue_landing",
        "POST",
        f"{API}/landings/",
        "Queue your issue's branch to land on the default branch, under its lease (session, "
        "fence) with the commit that holds the work. Testers apply the queue's head batch in "
        "order, run the project's check and land it only green; keep your lease and wait for "
        "landing.landed (then finish_work) or landing.rejected (give the issue back). Errors: "
        "landing_exists, lease_not_held, stale_fence, session_not_live.",
    ),
    ToolSpec(
        "list_landings",
        "GET",
        f"{API}/landings/",
        "The landing queue's entries in order of arrival (filter by project, state: queued, "
        "testing, landed, rejected; issue, session): each open one's place, its tester, and "
        "why a rejected one was (conflict, check_failed with the check's output, stale_fence).",
    ),
    ToolSpec(
        "take_landings",
        "POST",
        f"{API}/landings/take/",
        "As a tester: take the project's head batch (entries whose paths do not overlap, in "
        "order, up to max) under a new fence; nothing when another live tester holds it "
        "(busy). Apply them in order on the default branch, run the check once, then "
        "land_landing each (green) or bisect, reject_landing the culprit and return_landings "
        "the rest. The default branch only moves to a tree that passed.",
    ),
    ToolSpec(
        "land_landing",
        "POST",
        f"{API}/landings/{{id}}/land/",
        "As the batch's tester (session, fence): the entry landed, carried by commit on the "
        "default branch. stale_fence when another tester took the batch.",
        url_id="landing",
    ),
    ToolSpec(
        "reject_landing",
        "POST",
        f"{API}/landings/{{id}}/reject/",
        "As the batch's tester (session, fence): the entry is rejected, reason conflict (does "
        "not apply) or check_failed (its tree fails the check), with detail (the files, or "
        "the output's tail). Its agent gives the issue back.",
        url_id="landing",
    ),
    ToolSpec(
        "return_landings",
        "POST",
        f"{API}/landings/return/",
        "As the batch's tester (session, fence): the entries still under test go back to "
        "the queue at their place.",
    ),
    ToolSpec(
        "list_events",
        "GET",
        f"{API}/events/",
        "What happened, in order: the events after the cursor `after` (pass back each "
        "answer's `next`; you never miss one). wait=1..30 holds the call until an event "
        "arrives. Filter by type (comma-separated), project, issue, agent, session. Watch for "
        "lease.released and claims.released naming your session: reason expired or "
        "overridden means you lost it (data.by says to whom); stop editing those files.",
    ),
    ToolSpec(
        "get_ready_issues",
        "GET",
        f"{API}/issues/ready/",
        "Issues ready to work on: in todo, meeting the definition of ready, not blocked, with "
        "no live lease; urgent first, then oldest. Each names its collisions: its expected "
        "paths that another issue's live claim holds now (within a priority, issues without "
        "any come first; free=true lists only those). Take the first one without collisions.",
    ),
    ToolSpec(
        "link_issues",
        "POST",
        f"{API}/issues/{{id}}/links/",
        "Link this issue to a target: type blocks (the target cannot start until this issue "
        "is done or cancelled), parent_of (a child has one parent), relates_to or "
        "discovered_from. Linking again returns the existing link. A blocks or parent_of link "
        "that would close a cycle is refused with dependency_cycle and the cycle's ids.",
        url_id="issue",
    ),
    ToolSpec(
        "unlink_issues",
        "DELETE",
        f"{API}/issues/{{id}}/links/{{link}}/",
        "Remove a link of this issue (either end), by the link's id (the issue's links list "
        "them). Removing an issue's last unresolved blocker unblocks it.",
        url_id="issue",
        path_ids={"link": "link"},
    ),
    ToolSpec(
        "start_work",
        "POST",
        f"{API}/work/start/",
        "Register a session, lease the issue, claim the paths (without paths: the issue's "
        "expected paths) and announce it, all or nothing. Returns the session, lease, claims "
        "and message. A blocked issue is refused with blocked and its blocked_by.",
    ),
    ToolSpec(
        "finish_work",
        "POST",
        f"{API}/work/finish/",
        "Move the issue (default to in_review, with a report), release its file claims and "
        "lease, and end the session.",
    ),
)

TOOLS_BY_NAME: dict[str, ToolSpec] = {tool.name: tool for tool in TOOLS}
