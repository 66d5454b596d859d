"""The issue tools, list_file_claims and list_events, through the SDK client: each answers its REST
call's body, and each REST refusal is a tool error with the REST error JSON."""

import anyio
import pytest
from django.db import connection

from coordination.models import Event, Issue
from coordination.services import file_claims, leases
from tests.conftest import expire
from tests.coordination.mcp.conftest import call, connect, refused, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_list_issues_filters_by_project_status_and_lease(mcp_url, raw_key, make_issue):
    todo, backlog = make_issue(title="Todo", status="todo"), make_issue(title="Backlog")

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            everything = await call(client, "list_issues", project="core")
            assert [i["id"] for i in everything["results"]] == [backlog.pk, todo.pk]
            assert everything["count"] == 2 and everything["next"] is None
            ready = await call(client, "list_issues", status="todo", leased=False)
            assert [i["title"] for i in ready["results"]] == ["Todo"]
            assert (await call(client, "list_issues", project="nope"))["results"] == []

            bad = await refused(client, "list_issues", status="sideways")
            assert bad["code"] == "invalid" and "status" in bad["errors"]

    run(scenario)


def test_get_issue_shows_it_with_its_lease(mcp_url, raw_key, issue, make_session):
    holder = make_session("erin")

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            shown = await call(client, "get_issue", issue=issue.pk)
            assert (shown["id"], shown["title"], shown["lease"]) == (issue.pk, issue.title, None)
            await call(client, "claim_issue", issue=issue.pk, session=holder.pk)
            leased = await call(client, "get_issue", issue=issue.pk)
            assert leased["lease"]["session"] == holder.pk and leased["lease"]["live"] is True

            missing = await refused(client, "get_issue", issue=issue.pk + 1000)
            assert missing["code"] == "not_found"
            assert (await refused(client, "get_issue"))["errors"] == {
                "issue": ["This field is required."]
            }

    run(scenario)


def test_create_issue_starts_it_in_backlog_or_a_ready_todo(mcp_url, raw_key, project, agent):
    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            created = await call(client, "create_issue", project="core", title="Add search")
            assert (created["status"], created["project"]) == ("backlog", "core")
            ready = await call(
                client,
                "create_issue",
                project="core",
                title="Add logout",
                description="Done when a logged-in user can log out.",
                status="todo",
                priority=2,
                assignee=agent.name,
            )
            assert (ready["status"], ready["priority"], ready["assignee"]) == (
                "todo",
                2,
                agent.name,
            )

            unready = await refused(
                client, "create_issue", project="core", title="Vague", status="todo"
            )
            assert unready["code"] == "invalid_transition"
            assert unready["missing"] == ["description"]
            unknown = await refused(client, "create_issue", project="nope", title="Lost")
            assert (unknown["code"], unknown["field"]) == ("invalid", "project")

    run(scenario)
    assert set(Issue.objects.values_list("title", flat=True)) == {"Add search", "Add logout"}


def test_update_issue_edits_what_it_is_given_but_not_the_status(mcp_url, raw_key, issue, agent):
    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            schema = {t.name: t for t in (await client.list_tools()).tools}["update_issue"]
            assert {"status", "project"}.isdisjoint(schema.input_schema["properties"])
            assert {"issue", "title", "assignee"} <= set(schema.input_schema["properties"])

            edited = await call(
                client, "update_issue", issue=issue.pk, priority=1, assignee=agent.name
            )
            assert (edited["priority"], edited["assignee"], edited["title"]) == (
                1,
                agent.name,
                issue.title,
            )
            cleared = await call(client, "update_issue", issue=issue.pk, assignee=None)
            assert cleared["assignee"] is None

            moved = await refused(client, "update_issue", issue=issue.pk, status="done")
            assert moved["code"] == "invalid" and "status" in moved["errors"]
            ghost = await refused(client, "update_issue", issue=issue.pk, assignee="ghost")
            assert (ghost["code"], ghost["field"]) == ("invalid", "assignee")

    run(scenario)
    issue.refresh_from_db()
    assert (issue.status, issue.priority, issue.assignee) == ("backlog", 1, None)


def test_transition_issue_moves_it_along_the_workflow_only(mcp_url, raw_key, make_issue):
    issue, reviewed = make_issue(status="todo"), make_issue(title="Reviewed", status="in_review")

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            moved = await call(client, "transition_issue", issue=issue.pk, to="in_progress")
            assert moved["status"] == "in_progress"

            jump = await refused(client, "transition_issue", issue=issue.pk, to="done")
            assert jump["code"] == "invalid_transition"
            assert set(jump["allowed"]) == {"todo", "in_review", "cancelled"}
            gate = await refused(client, "transition_issue", issue=reviewed.pk, to="done")
            assert gate["code"] == "forbidden"  # only a person passes review

    run(scenario)
    assert Issue.objects.get(pk=reviewed.pk).status == "in_review"


def test_list_file_claims_shows_who_holds_what(mcp_url, raw_key, workspace, issue, make_session):
    holder = make_session("erin")
    file_claims.claim_files(
        workspace=workspace,
        issue_id=issue.pk,
        paths=["src/auth/login.py", "src/auth/logout.py", "docs/auth.md"],
        session_id=holder.pk,
    )
    file_claims.release_files(workspace=workspace, issue_id=issue.pk, paths=["docs/auth.md"])

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            held = await call(
                client, "list_file_claims", active=True, issue=issue.pk, path_prefix="src/auth"
            )
            assert sorted(c["path"] for c in held["results"]) == [
                "src/auth/login.py",
                "src/auth/logout.py",
            ]
            assert {(c["agent"], c["session"]) for c in held["results"]} == {("erin", holder.pk)}
            released = await call(client, "list_file_claims", active=False)
            assert [(c["path"], c["release_reason"]) for c in released["results"]] == [
                ("docs/auth.md", "released")
            ]

            outside = await refused(client, "list_file_claims", path="../etc/passwd")
            assert outside["code"] == "invalid" and "../etc/passwd" in outside["detail"]

    run(scenario)


def test_directory_claims_over_mcp(mcp_url, raw_key, workspace, make_issue, make_session):
    """Invariant 11 (overlap) through the tools: a directory claim, a file under it refused with
    its held_path, a glob refused, check_files and list_file_claims covering."""
    mine, theirs = make_issue(), make_issue()
    holder, me = make_session("erin"), make_session("me")

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            granted = await call(
                client, "claim_files", issue=theirs.pk, paths=["src/api/"], session=holder.pk
            )
            assert [c["path"] for c in granted["claims"]] == ["src/api/"]

            conflict = await refused(
                client, "claim_files", issue=mine.pk, paths=["src/api/v2/x.py"], session=me.pk
            )
            assert conflict["code"] == "file_conflict" and conflict["conflicts_total"] == 1
            assert conflict["conflicts"][0]["held_path"] == "src/api/"

            glob = await refused(client, "claim_files", issue=mine.pk, paths=["src/*.py"])
            assert glob["code"] == "invalid" and "claim the directory" in glob["detail"]

            checked = await call(
                client, "check_files", issue=mine.pk, paths=["src/api/x.py", "src/apiv2.py"]
            )
            assert [(c["path"], c["held_path"]) for c in checked["conflicts"]] == [
                ("src/api/x.py", "src/api/")
            ]
            covering = await call(client, "list_file_claims", covering="src/api/v2/x.py")
            assert [c["path"] for c in covering["results"]] == ["src/api/"]

    run(scenario)


def test_list_events_waits_and_tells_a_holder_its_lease_was_reclaimed(
    mcp_url, raw_key, workspace, issue, make_session
):
    """The agent's watch the instructions ask for: a long poll on its own session that
    answers with the reclaim, naming who took the lease."""
    holder, taker = make_session("erin"), make_session("frank")
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=holder.pk)
    expire(holder)
    cursor = Event.objects.filter(workspace=workspace).order_by("-pk").values_list("pk").first()

    def reclaim() -> None:
        leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=taker.pk)
        connection.close()

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            async with anyio.create_task_group() as group:
                group.start_soon(anyio.to_thread.run_sync, reclaim)
                answer = await call(
                    client, "list_events", session=holder.pk, after=cursor[0], wait=20
                )
            lost = [e for e in answer["events"] if e["type"] == "lease.released"]
            assert len(lost) == 1, answer
            assert lost[0]["data"]["reason"] == "expired"
            assert lost[0]["data"]["by"] == {"session": taker.pk, "agent": "frank"}
            assert (lost[0]["session"], lost[0]["agent"]) == (holder.pk, "erin")
            assert answer["next"] >= lost[0]["id"]

            bad = await refused(client, "list_events", type="lease.stolen")
            assert bad["code"] == "invalid" and "type" in bad["errors"]

    run(scenario)
