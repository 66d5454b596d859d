"""The landing queue's tools through the SDK client (invariant 21 (the default branch is
always green)): queue_landing, list_landings, take_landings, land_landing,
reject_landing and return_landings answer their REST calls' bodies (an entry as GET
/landings/{id}/ shows it, the list as GET /landings/ does), and a refusal is a tool
error with the REST error JSON and code."""

from typing import Any

import anyio
import pytest
from django.db import connection

from coordination.models import Event, Landing
from coordination.services import file_claims, leases
from tests.api_helpers import V1, post
from tests.coordination.mcp.conftest import call, connect, refused, run

pytestmark = pytest.mark.django_db(transaction=True)

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def leased(workspace, make_issue, make_session, n: int) -> dict[str, Any]:
    """An issue leased by a session of its own, ``src/<n>.py`` claimed: the queue body."""
    issue = make_issue(title=f"issue {n}")
    session = make_session(f"coder-{n}")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=[f"src/{n}.py"], session_id=session.pk
    )
    return {
        "issue": issue.pk,
        "session": session.pk,
        "branch": f"work-{n}",
        "commit": COMMIT,
        "fence": lease.lease.fence,
    }


def test_the_landing_tools_answer_as_rest_does(
    mcp_url, raw_key, api, workspace, project, make_issue, make_session
):
    project.agent_wip_limit = 50
    project.save()
    bodies = [leased(workspace, make_issue, make_session, n) for n in range(4)]
    tester, other = make_session("tester"), make_session("other-tester")

    def in_thread(request: Any) -> Any:
        """A REST call from the scenario: in a thread of its own (no database work in
        the event loop), its connection closed after."""

        def made() -> Any:
            try:
                return request()
            finally:
                connection.close()

        return anyio.to_thread.run_sync(made)

    async def rest(path: str, **query: Any) -> Any:
        response = await in_thread(lambda: api.get(f"{V1}{path}", query))
        assert response.status_code == 200, response.content
        return response.json()

    async def rest_post(path: str, body: dict[str, Any]) -> Any:
        return await in_thread(lambda: post(api, path, body))

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert {
                "queue_landing",
                "list_landings",
                "take_landings",
                "land_landing",
                "reject_landing",
                "return_landings",
            } <= set(tools)
            assert tools["list_landings"].annotations.read_only_hint is True
            assert tools["take_landings"].annotations.read_only_hint is False
            queue = tools["queue_landing"].input_schema
            assert {"issue", "session", "branch", "commit", "fence"} <= set(queue["required"])

            # Three queued through the tool, one over REST: the same entries either way.
            queued = [await call(client, "queue_landing", **body) for body in bodies[:3]]
            over_rest = await rest_post("/landings/", bodies[3])
            assert over_rest.status_code == 201, over_rest.content
            for entry in queued:
                assert entry == await rest(f"/landings/{entry['id']}/")
            assert [entry["place"] for entry in queued] == [1, 2, 3]
            assert queued[0]["state"] == "queued" and queued[0]["paths"] == ["src/0.py"]
            again = await refused(client, "queue_landing", **bodies[0])
            assert again["code"] == "landing_exists" and again["landing"] == queued[0]["id"]
            assert again == (await rest_post("/landings/", bodies[0])).json()

            listed = await call(client, "list_landings", project="core")
            assert listed == await rest("/landings/", project="core")
            assert [entry["id"] for entry in listed["results"]] == [
                *(entry["id"] for entry in queued),
                over_rest.json()["id"],
            ]

            # The head batch: the first three (max 3), under a new fence.
            taken = await call(client, "take_landings", session=tester.pk, project="core", max=3)
            assert taken["busy"] is None and taken["fence"] >= 1
            assert [entry["id"] for entry in taken["entries"]] == [e["id"] for e in queued]
            for entry in taken["entries"]:
                assert entry == await rest(f"/landings/{entry['id']}/")
                assert entry["state"] == "testing" and entry["fence"] == taken["fence"]
            busy = await call(client, "take_landings", session=other.pk, project="core")
            assert busy == {
                "fence": None,
                "entries": [],
                "busy": {"session": tester.pk, "agent": "tester", "fence": taken["fence"]},
            }
            fence = taken["fence"]
            first, second, third = (entry["id"] for entry in taken["entries"])

            landed = await call(
                client, "land_landing", landing=first, session=tester.pk, fence=fence,
                commit="f" * 40,
            )  # fmt: skip
            assert landed == await rest(f"/landings/{first}/")
            assert (landed["state"], landed["landed_commit"]) == ("landed", "f" * 40)

            rejected = await call(
                client, "reject_landing", landing=second, session=tester.pk, fence=fence,
                reason="check_failed", detail="NameError: name 'fetch' is not defined",
            )  # fmt: skip
            assert rejected == await rest(f"/landings/{second}/")
            assert (rejected["state"], rejected["reason"]) == ("rejected", "check_failed")
            assert rejected["detail"].endswith("not defined")

            returned = await call(client, "return_landings", session=tester.pk, fence=fence)
            assert returned == {"returned": [third]}
            assert (await rest(f"/landings/{third}/"))["state"] == "queued"

            # The batch is no longer this tester's: its reports are stale, as over REST.
            stale = await refused(
                client, "land_landing", landing=third, session=tester.pk, fence=fence,
                commit="f" * 40,
            )  # fmt: skip
            assert stale["code"] == "stale_fence" and stale["fence"] == fence
            body = {"session": tester.pk, "fence": fence, "commit": "f" * 40}
            assert stale == (await rest_post(f"/landings/{third}/land/", body)).json()
            bad = await refused(
                client, "reject_landing", landing=third, session=tester.pk, fence=fence,
                reason="stale_fence",
            )  # fmt: skip
            assert bad["code"] == "invalid" and "reason" in bad["errors"]

            waiting = await call(client, "list_landings", project="core", state="queued")
            assert waiting == await rest("/landings/", project="core", state="queued")
            assert [entry["id"] for entry in waiting["results"]] == [
                third,
                over_rest.json()["id"],
            ]

    run(scenario)
    states = dict(Landing.objects.values_list("pk", "state"))
    assert sorted(states.values()) == ["landed", "queued", "queued", "rejected"]
    kinds = list(Event.objects.filter(type__startswith="landing.").values_list("type", flat=True))
    assert kinds.count("landing.queued") == 4 + 1  # four queued, one returned
    assert kinds.count("landing.testing") == 3
