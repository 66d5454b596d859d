"""The work graph's tools through the SDK client: link_issues, unlink_issues, and
get_ready_issues with each issue's collisions (invariant 16 (the work graph))."""

import pytest

from coordination.models import Issue
from coordination.services import file_claims, graph
from tests.coordination.mcp.conftest import call, connect, refused, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_link_unlink_and_a_ready_queue_that_knows_blockers_and_collisions(
    mcp_url, raw_key, make_issue, make_session, workspace
):
    model = make_issue(title="model", status=Issue.Status.TODO)
    page = make_issue(title="page", status=Issue.Status.TODO)
    graph.set_expected_paths(issue=page, paths=["web/"])
    holder = make_issue(title="holder", status=Issue.Status.IN_PROGRESS)
    atlas = make_session("atlas")
    file_claims.claim_files(
        workspace=workspace, issue_id=holder.pk, paths=["web/page.html"], session_id=atlas.pk
    )

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            queue = await call(client, "get_ready_issues")
            collisions = {row["title"]: row["collisions"] for row in queue["results"]}
            assert collisions == {
                "model": [],
                "page": [
                    {
                        "path": "web/",
                        "held_path": "web/page.html",
                        "issue": holder.pk,
                        "agent": "atlas",
                    }
                ],
            }
            assert [
                row["title"]
                for row in (await call(client, "get_ready_issues", free=True))["results"]
            ] == ["model"]

            link = await call(client, "link_issues", issue=model.pk, type="blocks", target=page.pk)
            assert (link["source"], link["target"], link["type"]) == (model.pk, page.pk, "blocks")
            titles = [row["title"] for row in (await call(client, "get_ready_issues"))["results"]]
            assert titles == ["model"]
            cycle = await refused(
                client, "link_issues", issue=page.pk, type="blocks", target=model.pk
            )
            assert cycle["code"] == "dependency_cycle" and cycle["cycle"] == [page.pk, model.pk]
            blocked = await refused(client, "start_work", agent="coder", issue=page.pk)
            assert blocked["code"] == "blocked"

            await call(client, "unlink_issues", issue=page.pk, link=link["id"])
            shown = await call(client, "get_issue", issue=page.pk)
            assert shown["blocked_by"] == [] and shown["links"] == []
            missing = await refused(client, "unlink_issues", issue=page.pk, link=link["id"])
            assert missing["code"] == "not_found"

    run(scenario)
