"""The resource tools through the SDK client (invariant 20 (resources are counted)):
acquire_resource, release_resource and list_resources answer their REST calls' bodies;
the resource's name is the argument `name`, a string of the route's pattern; a refusal
is a tool error with the REST error JSON, and a bad name is a 400 or a 404, never a 500."""

import pytest

from coordination.models import Event, EventType, ResourceHold
from coordination.services import resources
from tests.coordination.mcp.conftest import call, connect, refused, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_acquire_list_and_release_a_resource(mcp_url, raw_key, workspace, issue, make_session):
    resources.create_resource(workspace=workspace, name="db:test", capacity=2)
    atlas, boreas, cetus = make_session("atlas"), make_session("boreas"), make_session("cetus")

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            acquire = tools["acquire_resource"].input_schema
            assert set(acquire["required"]) == {"name", "session"}
            assert {"units", "issue", "wait"} <= set(acquire["properties"])
            name = acquire["properties"]["name"]
            assert name["type"] == "string" and name["description"] == "The resource's name."
            assert set(tools["release_resource"].input_schema["required"]) == {"name", "session"}
            assert "fence" in tools["release_resource"].input_schema["properties"]
            assert "name" in tools["list_resources"].input_schema["properties"]
            assert tools["list_resources"].annotations.read_only_hint is True
            assert tools["acquire_resource"].annotations.read_only_hint is False

            first = await call(
                client, "acquire_resource", name="db:test", session=atlas.pk, issue=issue.pk
            )
            assert (first["resource"], first["agent"], first["slots"]) == ("db:test", "atlas", [0])
            assert (first["issue"], first["live"]) == (issue.pk, True)
            again = await call(client, "acquire_resource", name="db:test", session=atlas.pk)
            # The same hold, unchanged.
            assert (again["id"], again["slots"], again["fence"]) == (
                first["id"],
                first["slots"],
                first["fence"],
            )
            second = await call(client, "acquire_resource", name="db:test", session=boreas.pk)
            assert second["slots"] == [1]

            busy = await refused(client, "acquire_resource", name="db:test", session=cetus.pk)
            assert busy["code"] == "resource_busy"
            assert (busy["available"], busy["waiting"]) == (0, 0)
            assert {holder["agent"] for holder in busy["holders"]} == {"atlas", "boreas"}
            assert busy["holders"][0] == first  # a hold, as the acquire showed it
            timed_out = await refused(
                client, "acquire_resource", name="db:test", session=cetus.pk, wait=0.3
            )
            assert timed_out["code"] == "resource_busy"

            listed = await call(client, "list_resources")
            [shown] = listed["results"]
            assert (shown["name"], shown["capacity"], shown["in_use"], shown["available"]) == (
                "db:test",
                2,
                2,
                0,
            )
            assert [holder["agent"] for holder in shown["holders"]] == ["atlas", "boreas"]
            assert (await call(client, "list_resources", name="ports"))["results"] == []

            stale = await refused(
                client, "release_resource", name="db:test", session=atlas.pk, fence=99
            )
            assert stale["code"] == "stale_fence"
            released = await call(
                client, "release_resource", name="db:test", session=atlas.pk, fence=first["fence"]
            )
            assert (released["id"], released["release_reason"]) == (first["id"], "released")
            assert released["live"] is False
            twice = await refused(client, "release_resource", name="db:test", session=atlas.pk)
            assert twice["code"] == "hold_not_held"
            third = await call(client, "acquire_resource", name="db:test", session=cetus.pk)
            assert third["slots"] == [0]

    run(scenario)
    assert ResourceHold.objects.filter(released_at__isnull=True).count() == 2
    refusals = Event.objects.filter(type=EventType.RESOURCE_REFUSED)
    assert [event.data["resource"] for event in refusals] == ["db:test", "db:test"]


@pytest.mark.parametrize(
    "name",
    [
        "Bad Name",
        "db:test/release",  # would reach another route
        "../sessions",
        "db:test\n",  # a newline after the last character
        "x" * 65,
        "",
        7,
        None,
        ["db:test"],
    ],
    ids=repr,
)
def test_a_malformed_name_is_invalid_naming_the_argument(
    mcp_url, raw_key, workspace, make_session, name
):
    resources.create_resource(workspace=workspace, name="db:test")
    session = make_session("atlas")

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            for tool in ("acquire_resource", "release_resource"):
                bad = await refused(client, tool, name=name, session=session.pk)
                assert bad["code"] == "invalid" and list(bad["errors"]) == ["name"], bad

    run(scenario)
    assert not ResourceHold.objects.exists()


def test_a_missing_or_unknown_name_is_the_rest_answer(
    mcp_url, raw_key, workspace, other_workspace, make_session
):
    resources.create_resource(workspace=other_workspace, name="db:test")
    session = make_session("atlas")

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            missing = await refused(client, "acquire_resource", session=session.pk)
            assert missing["errors"] == {"name": ["This field is required."]}
            for tool in ("acquire_resource", "release_resource"):
                # Well formed, but no resource of this workspace: the REST 404.
                unknown = await refused(client, tool, name="db:test", session=session.pk)
                assert unknown["code"] == "not_found", unknown

    run(scenario)
    assert not ResourceHold.objects.exists()
