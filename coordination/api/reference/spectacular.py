"""drf-spectacular's settings: the reference's title, description and tags, and the
hooks that finish it (``hooks``). Plain data, read by projektor/settings.py (as
``SPECTACULAR_SETTINGS``): importing this module imports nothing of Django's."""

# The reference at /api/v1/docs/. Its hook (hooks.postprocess) adds the refusals every
# operation shares, and appends the MCP tools' table to the description.
API_DESCRIPTION = """\
Projektor coordinates a fleet of coding agents on one issue tracker: sessions that
prove they are alive, exclusive leases on issues under each project's WIP cap,
all-or-nothing claims on file paths, messages, and runs on worktrees. Every call is
scoped to one workspace: the key's. The words are those of docs/design.md; docs/api.md
says the same as this reference, in prose.

## Auth

Agents send a workspace API key: `Authorization: Bearer <key>` (made with `python
manage.py create_api_key <workspace>`, in the admin or with `POST /keys/`; only its
digest is stored). The key is the actor: a `fleet` key acts for any agent, an `agent`
key only as its one agent (its sessions, its name; `force` only if minted with
`can_force`), a `read` key only reads; what a key may not do is 403 `forbidden` and
changes nothing (`GET /keys/me/` says what this key is). People logged in to the site
use their session cookie, the CSRF token on writes, and name the workspace with
`X-Projektor-Workspace: <slug>` (or `?workspace=`). No key, or a malformed, unknown,
revoked or expired one: 401 `unauthenticated`. This page and the schema at
`/api/v1/schema/` are public.

## Errors

Every refusal is JSON in one shape, `{"code": "...", "detail": "...", ...}`: `code` is
stable (switch on it), `detail` is a sentence for people, and some codes add fields:
`holder`, `limit`, `conflicts`, `allowed`, `missing`, `fence`, `current_fence`, `run`,
`errors`, `field`, `path`. Each operation lists every status and code it can answer,
with when and an example body. 400 `invalid` (the body or a query parameter), 401,
404 `not_found` (an id not in the workspace: another workspace's rows answer as absent),
429 `throttled` and 503 `unavailable` (both with `Retry-After`) can come from any call;
writes add 403 (a key that may not make the call, a person's missing CSRF token), 413
and 415.

## Lists

Every list is a page of 100, `{"count", "next", "previous", "results"}`, `?page=N`,
newest first unless said; a filter that does not parse is a 400, never ignored.

## MCP

`POST /mcp` speaks the Model Context Protocol (Streamable HTTP, stateless, JSON
responses) with the same bearer key, for agents whose client speaks MCP. Each tool is
one of the REST calls below, made in-process: the same validation, errors and rate
limit. A tool's arguments are the call's JSON body (for a GET, its query parameters)
plus the URL id as `issue`, `session` or `run`; `tools/list` gives each input schema,
derived from this document. The result is the REST response body; a refused call is a
tool result with `isError: true` whose text is the error JSON above. `initialize` tells
the agent the route: read `get_workflow`, then `start_work` (or `register_agent`,
`claim_issue`, `claim_files` and `transition_issue` to `in_progress`), heartbeat within
the session TTL, and `finish_work`.

With the official Python SDK (`pip install mcp`):

```python
import asyncio

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, key: str) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"})
    async with (
        http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        workflow = await session.call_tool("get_workflow", {})
        ready = await session.call_tool("get_ready_issues", {})
        print(workflow.content[0].text)
        print(ready.content[0].text)  # then start_work with one of these issues


asyncio.run(main("http://127.0.0.1:8000/mcp", "<key>"))
```

The tools, and the call each one makes:
"""

SPECTACULAR_SETTINGS = {
    "TITLE": "Projektor API",
    "DESCRIPTION": API_DESCRIPTION,
    "VERSION": "1.0.0",
    # One tag per resource group, in the order an agent meets them.
    "TAGS": [
        {
            "name": "Work",
            "description": "The shortest route for an agent: start_work registers a "
            "session, leases the issue and claims its paths in one call, finish_work moves "
            "the issue on, releases all of it and ends the session; the ready queue says "
            "what to pick.",
        },
        {
            "name": "Sessions",
            "description": "An agent's presence. A session is live while its last heartbeat is "
            "younger than the TTL (invariant 1 (liveness)); what it holds (leases, file claims, "
            "worktree locks) is held only while it is live.",
        },
        {
            "name": "Projects and issues",
            "description": "Projects, each with its WIP cap; issues; and the workflow "
            "they move through (GET /workflow/: the rules the transitions enforce).",
        },
        {
            "name": "Leases",
            "description": "Exclusive ownership of an issue by one live session "
            "(invariant 2 (one live lease per issue)), admitted by the project's WIP cap "
            "(invariant 3 (the WIP cap)); a dead holder's lease is reclaimed by the next claimer "
            "(invariant 4 (stale reclaim)). A lease's `fence` lets its holder act only while the "
            "lease is still its own.",
        },
        {
            "name": "File claims",
            "description": "Claims on file paths for an issue, all or nothing: a path is held by "
            "one issue at a time, and paths are literal after normalisation "
            "(invariants 4 (stale reclaim), 5 (all-or-nothing) and 6 (paths are literal)). The "
            "check and the pre-commit guard read them.",
        },
        {
            "name": "Messages",
            "description": "Notes to an issue, an agent or a project: what agents tell "
            "each other, and what Projektor tells them (a forced claim, a report).",
        },
        {
            "name": "Resources",
            "description": "Counted holds on what no path names (a test database, a pool "
            "of ports, the migration head): units with slot numbers, live as a lease is, "
            "waited for in order of arrival (invariant 20 (resources are counted)).",
        },
        {
            "name": "Landings",
            "description": "The landing queue: branches queued under their lease, tested in "
            "batches of entries whose paths do not overlap by runners that run git and the check; "
            "the default branch only moves to a tree that passed "
            "(invariant 21 (the default branch is always green)).",
        },
        {
            "name": "Events",
            "description": "The log of everything that happened, in commit order: read it by "
            "cursor (`after`, then each answer's `next`), wait for what comes next (`wait`), or "
            "stream it (Server-Sent Events). Never misses an event "
            "(invariant 12 (one event per change)).",
        },
        {
            "name": "Webhooks",
            "description": "The event log pushed to your URL: signed with HMAC-SHA256, in "
            "event order per webhook, at least once, retried with backoff; a webhook whose "
            "delivery fails for the whole retry window is deactivated, saying why.",
        },
        {
            "name": "Keys",
            "description": "Who is calling, and (fleet keys) minting, listing and revoking keys: "
            "fleet keys act for any agent, agent keys as one agent only, read keys only read "
            "(invariant 13 (the key is the actor)). A revoked or expired key is 401 at once.",
        },
        {
            "name": "Worktrees and runs",
            "description": "Checkouts, and the runs of issues on them: a run that needs "
            "a filesystem locks one worktree exclusively (invariant 10 (lock mode per run)).",
        },
        {
            "name": "Contention logs",
            "description": "The refused claims, append-only (invariant 8 (append-only logs)): file "
            "conflicts and WIP-cap denials.",
        },
        {
            "name": "Heatmap",
            "description": "Where agents work and where they collide: events per path "
            "prefix in a time window.",
        },
    ],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "coordination.api.reference.hooks.postprocess",
    ],
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "filter": True, "persistAuthorization": True},
    "SORT_OPERATIONS": False,  # the URLconf's order: start_work before finish_work, ...
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Library classes whose docstrings describe no schema component (FieldsBoundOnce's).
    "GET_LIB_DOC_EXCLUDES": "coordination.api.reference.hooks.lib_doc_excludes",
    "ENUM_NAME_OVERRIDES": {
        "IssueStatusEnum": "coordination.models.Issue.Status",
        "SessionStatusEnum": "coordination.models.AgentSession.Status",
        "RunStatusEnum": "coordination.models.Run.Status",
        "EventTypeEnum": "coordination.models.EventType",
        "DeliveryStateEnum": "coordination.models.WebhookDelivery.State",
    },
}
