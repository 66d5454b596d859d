"""The one-call subcommands: each a thin wrapper over one REST call."""

from __future__ import annotations

import argparse
import os
from typing import Any

from projektor_agent import config
from projektor_agent.client import Client, for_issue
from projektor_agent.errors import OK, REFUSED, CommandError, UsageError
from projektor_agent.output import emit

EVENT_WAIT_SECONDS = 25  # one long poll of `events --follow` (the server allows 30)


def client_for(args: argparse.Namespace) -> Client:
    return Client(config.load())


def number(raw: Any, what: str, env_name: str) -> int:
    text = str(raw).strip().lstrip("#")
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise UsageError(f"{what} is {raw!r}: give its id, like 42 (--{what} or {env_name})")
    return int(text)


def issue_of(args: argparse.Namespace) -> int:
    raw = getattr(args, "issue", None) or os.environ.get("PROJEKTOR_ISSUE")
    if not raw:
        raise UsageError(
            "which issue? give --issue N, or run inside `projektor run` (PROJEKTOR_ISSUE)"
        )
    return number(raw, "issue", "PROJEKTOR_ISSUE")


def session_of(args: argparse.Namespace) -> int:
    raw = getattr(args, "session", None) or os.environ.get("PROJEKTOR_SESSION")
    if not raw:
        raise UsageError(
            "which session? give --session N, or run inside `projektor run` (PROJEKTOR_SESSION)"
        )
    return number(raw, "session", "PROJEKTOR_SESSION")


def fence_of(args: argparse.Namespace) -> int | None:
    """The runner's lease fence, when the call is for the runner's own issue: a lease
    taken from it meanwhile turns the call into a refusal (stale_fence)."""
    raw = os.environ.get("PROJEKTOR_FENCE", "")
    if not raw.isdigit() or getattr(args, "issue", None):
        return None
    return int(raw)


def agent_of(client: Client) -> str:
    """The configured agent, else the one an agent key names."""
    if client.config.agent:
        return client.config.agent
    me = client.get("/keys/me/")
    if isinstance(me, dict) and me.get("agent"):
        return str(me["agent"])
    raise config.agent_required()


def issue_line(issue: dict[str, Any]) -> str:
    lease = issue.get("lease") or {}
    held = f"  [held by {lease.get('agent')}]" if lease else ""
    collisions = issue.get("collisions") or []
    near = (
        f"  (collides: {', '.join(c.get('path', '?') for c in collisions)})" if collisions else ""
    )
    return f"#{issue['id']:<5} {issue.get('status', ''):<11} {issue.get('title', '')}{held}{near}"


# --- subcommands --------------------------------------------------------------------------


def whoami(args: argparse.Namespace) -> int:
    client = client_for(args)
    me = client.get("/keys/me/")
    agent = me.get("agent") or client.config.agent or "(none: set PROJEKTOR_AGENT)"
    emit(
        args.json,
        me,
        [
            f"key {me.get('name') or me.get('id')} ({me.get('kind')}) of workspace "
            f"{me.get('workspace')}",
            f"agent {agent}",
            f"server {client.config.url}",
        ],
    )
    return OK


def ready(args: argparse.Namespace) -> int:
    query = {"project": args.project, "free": "true" if args.free else None}
    page = client_for(args).get("/issues/ready/", query)
    issues = results(page)
    emit(args.json, page, [issue_line(i) for i in issues] or ["nothing is ready"])
    return OK


def show(args: argparse.Namespace) -> int:
    issue_id = number(args.issue_id, "issue", "PROJEKTOR_ISSUE")
    issue = client_for(args).get(f"/issues/{issue_id}/")
    lines = [issue_line(issue), "", str(issue.get("description") or "").rstrip()]
    if issue.get("paths"):
        lines += ["", "paths: " + " ".join(issue["paths"])]
    emit(args.json, issue, lines)
    return OK


def start(args: argparse.Namespace) -> int:
    client = client_for(args)
    issue_id = number(args.issue_id, "issue", "PROJEKTOR_ISSUE")
    body: dict[str, Any] = {"agent": agent_of(client), "issue": issue_id}
    if args.paths:
        body["paths"] = args.paths
    if args.worktree:
        body["worktree"] = args.worktree
    try:
        started = client.post("/work/start/", body)
    except CommandError as error:
        raise for_issue(error, issue_id) from None
    session, lease = started["session"], started["lease"]
    emit(
        args.json,
        started,
        [
            f"started issue {issue_id}: session {session['id']}, lease fence {lease['fence']}",
            f"export PROJEKTOR_ISSUE={issue_id} PROJEKTOR_SESSION={session['id']} "
            f"PROJEKTOR_FENCE={lease['fence']}",
        ],
    )
    return OK


def finish(args: argparse.Namespace) -> int:
    issue_id, session_id = issue_of(args), session_of(args)
    body: dict[str, Any] = {"session": session_id, "issue": issue_id, "to": args.to}
    if args.summary:
        report = {"summary": args.summary, "verification": args.verification or "not given"}
        if args.pr_link:
            report["pr_link"] = args.pr_link
        body["report"] = report
    done = client_for(args).post("/work/finish/", body)
    emit(args.json, done, [f"issue {issue_id} moved to {args.to}; session {session_id} ended"])
    return OK


def claim(args: argparse.Namespace) -> int:
    issue_id = issue_of(args)
    body: dict[str, Any] = {"issue": issue_id, "paths": args.paths, "session": session_of(args)}
    fence = fence_of(args)
    if fence is not None:
        body["fence"] = fence
    claimed = client_for(args).post("/file-claims/", body)
    lines = [f"claimed for issue {issue_id}: {c['path']}" for c in claimed.get("claims", [])]
    lines += [f"(reclaimed from a dead holder: {p})" for p in claimed.get("reclaimed", [])]
    emit(args.json, claimed, lines)
    return OK


def release(args: argparse.Namespace) -> int:
    issue_id = issue_of(args)
    body: dict[str, Any] = {"issue": issue_id, "session": session_of(args)}
    if args.paths:
        body["paths"] = args.paths
    released = client_for(args).post("/file-claims/release/", body)
    paths = released.get("released", [])
    emit(args.json, released, [f"released: {p}" for p in paths] or ["nothing to release"])
    return OK


def check(args: argparse.Namespace) -> int:
    """Read-only; exit 1 when another issue holds any of the paths."""
    issue_id = issue_of(args)
    body = {"issue": issue_id, "paths": args.paths}
    answer = client_for(args).post("/file-claims/check/", body, idempotent=True)
    conflicts = answer.get("conflicts", [])
    lines = [
        f"{c['path']} is claimed by issue {c['issue']} (agent {c.get('agent') or 'none'})"
        for c in conflicts
    ]
    emit(args.json, answer, lines or ["free: no other issue holds these paths"])
    return REFUSED if conflicts else OK


def heartbeat(args: argparse.Namespace) -> int:
    session_id = session_of(args)
    session = client_for(args).post(f"/sessions/{session_id}/heartbeat/", idempotent=True)
    emit(args.json, session, [f"session {session_id}: live={session.get('live')}"])
    return OK


def message(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"scope": args.scope, "body": args.body}
    session = getattr(args, "session", None) or os.environ.get("PROJEKTOR_SESSION")
    if session:
        body["session"] = number(session, "session", "PROJEKTOR_SESSION")
    posted = client_for(args).post("/messages/", body)
    emit(args.json, posted, [f"posted message {posted.get('id')} to {args.scope}"])
    return OK


def events(args: argparse.Namespace) -> int:
    client = client_for(args)
    query: dict[str, Any] = {
        "after": args.after,
        "type": args.type,
        "project": args.project,
        "issue": args.issue,
        "agent": args.agent,
        "session": args.session,
    }
    while True:
        if args.follow:
            query["wait"] = EVENT_WAIT_SECONDS
        try:
            page = client.get("/events/", query, timeout=EVENT_WAIT_SECONDS + 20)
        except KeyboardInterrupt:  # ^C is how a follower stops
            return OK
        for event in page.get("events", []):
            emit(args.json, event, [event_line(event)])
        query["after"] = page.get("next", query["after"])
        if not args.follow:
            if not args.json and not page.get("events"):
                print("no events")
            return OK


def event_line(event: dict[str, Any]) -> str:
    who = f" agent {event['agent']}" if event.get("agent") else ""
    issue = f" issue {event['issue']}" if event.get("issue") else ""
    data = event.get("data") or {}
    extra = " " + " ".join(f"{k}={v}" for k, v in sorted(data.items())) if data else ""
    return f"{event['id']} {event.get('occurred_at', '')} {event['type']}{issue}{who}{extra}"


def results(page: Any) -> list[dict[str, Any]]:
    if isinstance(page, dict):
        return list(page.get("results", []))
    return list(page or [])
