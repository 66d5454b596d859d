"""The MCP server, driven by the official SDK's Streamable HTTP client.

The tests talk to a live server (a real HTTP port) as a coding agent would: the
SDK client with the bearer key. Every conversation is bounded by TIMEOUT seconds.
"""

import re

import httpx2
import pytest
from mcp import types
from mcp.shared.exceptions import MCPError

from coordination.models import FileClaim, Issue
from tests.api_helpers import post
from tests.coordination.mcp.conftest import TIMEOUT, call, connect, refused, run

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {
    "register_agent",
    "heartbeat_agent",
    "end_agent",
    "list_active_agents",
    "get_workflow",
    "claim_issue",
    "release_issue",
    "claim_files",
    "check_files",
    "release_files",
    "get_code_heatmap",
    "post_message",
    "list_messages",
    "dispatch",
    "get_ready_issues",
    "start_work",
    "finish_work",
    "dispatch_run",
    "finish_run",
    "list_issues",
    "get_issue",
    "create_issue",
    "update_issue",
    "transition_issue",
    "list_file_claims",
    "list_events",
    "whoami",
    "link_issues",
    "unlink_issues",
    "report_progress",
    "acquire_resource",
    "release_resource",
    "list_resources",
    "queue_landing",
    "list_landings",
    "take_landings",
    "land_landing",
    "reject_landing",
    "return_landings",
}
# The words of the instructions that look like tool names but are states or codes.
NOT_TOOLS = {"in_progress", "in_review", "file_conflict"}
REPORT = {"summary": "Login fixed.", "verification": "Tests pass."}


def test_initialize_gives_instructions_and_lists_every_tool(mcp_url, raw_key):
    async def scenario() -> None:
        async with connect(mcp_url, raw_key, initialize=False) as session:
            init = await session.initialize()
            assert "get_workflow" in (init.instructions or "")
            assert "heartbeat" in init.instructions and "claim" in init.instructions
            assert init.server_info.name == "projektor"
            assert init.capabilities.tools is not None

            listed = await session.list_tools()
            tools = {tool.name: tool for tool in listed.tools}
            assert set(tools) == TOOLS and len(listed.tools) == len(TOOLS)
            for tool in listed.tools:
                assert tool.description
                assert tool.input_schema["type"] == "object", tool.name
                assert "properties" in tool.input_schema, tool.name

            claim_files = tools["claim_files"].input_schema
            assert set(claim_files["required"]) == {"issue", "paths"}
            assert claim_files["properties"]["paths"]["type"] == "array"
            assert claim_files["properties"]["paths"]["maxItems"] == 100
            assert claim_files["properties"]["force"]["type"] == "boolean"
            assert claim_files["properties"]["session"]["type"] == ["integer", "null"]
            assert set(tools["claim_issue"].input_schema["required"]) == {"issue", "session"}
            assert tools["heartbeat_agent"].input_schema["required"] == ["session"]
            finish_run = tools["finish_run"].input_schema
            assert set(finish_run["required"]) == {"run", "outcome"}
            assert set(finish_run["properties"]["outcome"]["enum"]) == {"succeeded", "failed"}
            assert "live" in tools["list_active_agents"].input_schema["properties"]
            assert tools["get_workflow"].input_schema["properties"] == {}
            assert tools["list_active_agents"].annotations.read_only_hint is True
            start_work = tools["start_work"].input_schema
            # An agent key's own agent when omitted (invariant 13 (the key is the actor)); a fleet
            # key names it.
            assert start_work["required"] == ["issue"] and "agent" in start_work["properties"]
            finish_work = tools["finish_work"].input_schema
            assert {"session", "issue"} <= set(finish_work["required"])
            transition = tools["transition_issue"].input_schema
            assert set(transition["required"]) == {"issue", "to"}
            assert "in_progress" in transition["properties"]["to"]["enum"]
            assert tools["get_issue"].input_schema["required"] == ["issue"]
            assert {"project", "status", "leased"} <= set(
                tools["list_issues"].input_schema["properties"]
            )
            assert tools["update_issue"].annotations.read_only_hint is False

    run(scenario)


def in_order(text: str, *words: str) -> bool:
    at = [text.find(word) for word in words]
    return -1 not in at and at == sorted(at)


def test_the_instructions_name_only_tools_and_both_routes(mcp_url, raw_key):
    async def scenario() -> None:
        async with connect(mcp_url, raw_key, initialize=False) as session:
            text = (await session.initialize()).instructions or ""
            named = set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", text)) - NOT_TOOLS
            assert named <= TOOLS, named - TOOLS
            quick, step_by_step = text.split("(1)")[1].split("(2)")
            assert in_order(quick, "start_work", "finish_work")
            assert in_order(
                step_by_step,
                "register_agent",
                "claim_issue",
                "claim_files",
                "transition_issue to in_progress",
                "finish_work",
            )

    run(scenario)


def test_agents_claim_issues_and_files_and_collide(mcp_url, raw_key, make_issue):
    first, second = make_issue(title="Login"), make_issue(title="Logout")

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as session:
            workflow = await call(session, "get_workflow")
            assert "todo" in workflow["states"]

            alice = await call(session, "register_agent", agent="alice", role="coder")
            assert alice["agent"] == "alice" and alice["live"] is True
            beat = await call(session, "heartbeat_agent", session=alice["id"])
            assert beat["id"] == alice["id"]

            lease = await call(session, "claim_issue", issue=first.pk, session=alice["id"])
            assert lease["issue"] == first.pk and lease["session"] == alice["id"]

            claimed = await call(
                session,
                "claim_files",
                issue=first.pk,
                session=alice["id"],
                paths=["./src//auth.py", "src/views.py"],
            )
            assert [c["path"] for c in claimed["claims"]] == ["src/auth.py", "src/views.py"]

            live = await call(session, "list_active_agents", live=True)
            assert [s["agent"] for s in live["results"]] == ["alice"]

            bob = await call(session, "register_agent", agent="bob")
            conflict = await refused(
                session,
                "claim_files",
                issue=second.pk,
                session=bob["id"],
                paths=["src/auth.py", "src/other.py"],
            )
            assert conflict["code"] == "file_conflict"
            assert conflict["conflicts"] == [
                {
                    "path": "src/auth.py",
                    "held_path": "src/auth.py",
                    "issue": first.pk,
                    "session": alice["id"],
                    "agent": "alice",
                }
            ]

            released = await call(session, "release_files", issue=first.pk, paths=["src/auth.py"])
            assert released == {"released": ["src/auth.py"]}
            await call(
                session, "claim_files", issue=second.pk, session=bob["id"], paths=["src/auth.py"]
            )

            await call(session, "post_message", scope=f"issue:{first.pk}", body="done with auth")
            messages = await call(session, "list_messages", scope=f"issue:{first.pk}")
            assert [m["body"] for m in messages["results"]] == ["done with auth"]

            released_lease = await call(
                session, "release_issue", issue=first.pk, session=alice["id"]
            )
            assert released_lease["release_reason"] == "released"
            ended = await call(session, "end_agent", session=alice["id"])
            assert ended["status"] == "ended"

    run(scenario)
    assert set(
        FileClaim.objects.filter(released_at__isnull=True).values_list("path", flat=True)
    ) == {"src/auth.py"}


def test_refusals_are_tool_errors_with_the_rest_error(mcp_url, raw_key, issue, api):
    absent = issue.pk + 1000
    texts: list[str] = []

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as session:
            not_a_list = await refused(session, "claim_files", issue=issue.pk, paths="src/a.py")
            assert not_a_list["code"] == "invalid" and "paths" in not_a_list["errors"]

            bad_path = await refused(session, "claim_files", issue=issue.pk, paths=["/etc/passwd"])
            assert bad_path["code"] == "invalid" and "/etc/passwd" in bad_path["detail"]

            no_id = await refused(session, "claim_issue", session=1)
            assert no_id["code"] == "invalid" and no_id["errors"] == {
                "issue": ["This field is required."]
            }
            assert (await refused(session, "heartbeat_agent", session="x"))["code"] == "invalid"

            missing = await session.call_tool("claim_issue", {"issue": absent, "session": 1})
            assert missing.is_error and isinstance(missing.content[0], types.TextContent)
            texts.append(missing.content[0].text)

            ghost = await refused(session, "claim_issue", issue=issue.pk, session=999999)
            assert ghost["code"] == "invalid"  # an unknown session in a body is a 400

            agent = await call(session, "register_agent", agent="carol")
            await call(session, "end_agent", session=agent["id"])
            ended = await refused(session, "heartbeat_agent", session=agent["id"])
            assert ended["code"] == "session_ended"

    run(scenario)
    # Verbatim: the very bytes the REST API answers to the same call.
    rest = post(api, f"/issues/{absent}/claim/", {"session": 1})
    assert rest.status_code == 404
    assert texts == [rest.content.decode()]


def test_unknown_tool_is_a_protocol_error(mcp_url, raw_key):
    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as session:
            with pytest.raises(MCPError) as raised:
                await session.call_tool("drop_database", {})
            assert raised.value.code == types.INVALID_PARAMS
            assert "drop_database" in raised.value.message

    run(scenario)


def test_malformed_requests_are_jsonrpc_errors(mcp_url, raw_key):
    headers = {
        "Authorization": f"Bearer {raw_key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    not_json = httpx2.post(mcp_url, content=b"{not json", headers=headers, timeout=TIMEOUT)
    assert not_json.status_code == 400
    assert not_json.json()["error"]["code"] == types.PARSE_ERROR

    not_rpc = httpx2.post(mcp_url, json={"hello": "world"}, headers=headers, timeout=TIMEOUT)
    assert not_rpc.status_code == 400
    assert not_rpc.json()["jsonrpc"] == "2.0" and "error" in not_rpc.json()

    as_text = httpx2.post(
        mcp_url,
        content=b"{}",
        headers={**headers, "Content-Type": "text/plain"},
        timeout=TIMEOUT,
    )
    assert as_text.status_code == 415 and as_text.json()["code"] == "unsupported_media_type"

    no_method = httpx2.post(
        mcp_url,
        json={"jsonrpc": "2.0", "id": 7, "method": "tools/frobnicate"},
        headers=headers,
        timeout=TIMEOUT,
    )
    assert no_method.headers["content-type"].startswith("application/json")
    assert no_method.json()["error"]["code"] == types.METHOD_NOT_FOUND


def test_the_per_request_protocol_era_is_served_too(mcp_url, raw_key, issue):
    async def scenario() -> None:
        async with connect(mcp_url, raw_key, initialize=False) as session:
            discovered = await session.discover()
            assert "get_workflow" in (discovered.instructions or "")
            agent = await call(session, "register_agent", agent="dora")
            lease = await call(session, "claim_issue", issue=issue.pk, session=agent["id"])
            assert lease["agent"] == "dora"

    run(scenario)


def test_dispatch_and_finish_a_run(mcp_url, raw_key, make_issue):
    first, second = make_issue(title="One"), make_issue(title="Two")

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as session:
            agent = await call(session, "register_agent", agent="gus")
            started = await call(session, "dispatch", session=agent["id"], issue=first.pk)
            assert started["status"] == "running" and started["lock_mode"] == "none"
            done = await call(session, "finish_run", run=started["id"], outcome="succeeded")
            assert done["status"] == "succeeded"
            again = await refused(session, "finish_run", run=started["id"], outcome="failed")
            assert again["code"] == "run_not_running"

            other = await call(session, "dispatch_run", session=agent["id"], issue=second.pk)
            assert other["issue"] == second.pk
            bad = await refused(session, "finish_run", run=other["id"], outcome="maybe")
            assert bad["code"] == "invalid" and "outcome" in bad["errors"]

    run(scenario)


def test_start_work_then_finish_work(mcp_url, raw_key, make_issue):
    issue = make_issue(title="Fix login", status="in_progress")

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as session:
            started = await call(
                session, "start_work", agent="erin", issue=issue.pk, paths=["./src/login.py"]
            )
            session_id = started["session"]["id"]
            assert started["session"]["agent"] == "erin"
            assert started["lease"]["issue"] == issue.pk
            assert [c["path"] for c in started["claims"]] == ["src/login.py"]
            assert started["message"]["scope"] == f"issue:{issue.pk}"

            taken = await refused(session, "start_work", agent="fred", issue=issue.pk)
            assert taken["code"] == "lease_held"

            unreported = await refused(session, "finish_work", session=session_id, issue=issue.pk)
            assert unreported["code"] == "invalid_transition"
            assert unreported["missing"] == ["report"]

            finished = await call(
                session,
                "finish_work",
                session=session_id,
                issue=issue.pk,
                report={"summary": "Login fixed.", "verification": "Tests pass."},
            )
            assert finished["issue"]["status"] == "in_review"
            assert finished["released"] == ["src/login.py"]
            assert finished["session"]["status"] == "ended"

    run(scenario)
    assert not FileClaim.objects.filter(released_at__isnull=True).exists()


def test_the_start_work_route_takes_a_todo_issue_to_in_review(mcp_url, raw_key, make_issue):
    issue = make_issue(title="Fix login", status="todo")

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as session:
            [ready] = (await call(session, "get_ready_issues"))["results"]
            started = await call(
                session, "start_work", agent="erin", issue=ready["id"], paths=["src/login.py"]
            )
            shown = await call(session, "get_issue", issue=issue.pk)
            assert (shown["status"], shown["assignee"]) == ("in_progress", "erin")
            finished = await call(
                session,
                "finish_work",
                session=started["session"]["id"],
                issue=issue.pk,
                report=REPORT,
            )
            assert (finished["issue"]["status"], finished["issue"]["assignee"]) == (
                "in_review",
                "erin",
            )

    run(scenario)
    issue.refresh_from_db()
    assert (issue.status, issue.assignee.name) == ("in_review", "erin")


def test_the_step_by_step_route_takes_a_todo_issue_to_in_review(mcp_url, raw_key, make_issue):
    issue = make_issue(title="Fix login", status="todo")

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as session:
            agent = await call(session, "register_agent", agent="erin")
            lease = await call(session, "claim_issue", issue=issue.pk, session=agent["id"])
            assert lease["agent"] == "erin"
            await call(
                session, "claim_files", issue=issue.pk, session=agent["id"], paths=["src/login.py"]
            )
            # Still todo: finishing now is the dead end the transition step avoids.
            early = await refused(
                session, "finish_work", session=agent["id"], issue=issue.pk, report=REPORT
            )
            assert early["code"] == "invalid_transition" and "in_progress" in early["allowed"]

            moved = await call(session, "transition_issue", issue=issue.pk, to="in_progress")
            assert (moved["status"], moved["assignee"]) == ("in_progress", "erin")
            finished = await call(
                session, "finish_work", session=agent["id"], issue=issue.pk, report=REPORT
            )
            assert finished["issue"]["status"] == "in_review"
            assert finished["released"] == ["src/login.py"]
            assert finished["session"]["status"] == "ended"

    run(scenario)
    issue.refresh_from_db()
    assert (issue.status, issue.assignee.name) == ("in_review", "erin")
    assert not Issue.objects.filter(leases__released_at__isnull=True).exists()
