"""``list_active_agents`` lists the live sessions unless asked otherwise: ``live=false``
gives the others (as the REST filter does), ``live=null`` every session."""

import pytest

from coordination.services import agents
from coordination.tools import TOOLS_BY_NAME
from tests.conftest import expire
from tests.coordination.mcp.conftest import call, connect, refused, run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fleet(workspace, make_session):
    """A live session, a stale one (stopped heartbeating) and an ended one."""
    live, stale, ended = make_session("live-1"), make_session("stale-1"), make_session("ended-1")
    expire(stale)
    agents.end_session(workspace=workspace, session_id=ended.pk)
    return {"live": live.pk, "stale": stale.pk, "ended": ended.pk}


def ids(page):
    return {session["id"] for session in page["results"]}


def test_without_arguments_only_live_sessions_are_listed(mcp_url, raw_key, fleet):
    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            listed = await call(client, "list_active_agents")
            assert ids(listed) == {fleet["live"]} and listed["count"] == 1
            assert {s["live"] for s in listed["results"]} == {True}
            by_agent = await call(client, "list_active_agents", agent="stale-1")
            assert by_agent["results"] == []

    run(scenario)


def test_live_false_lists_those_not_live_as_the_rest_filter_does(mcp_url, raw_key, fleet, api):
    rest = api.get("/api/v1/sessions/", {"live": "false"}).json()

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            not_live = await call(client, "list_active_agents", live=False)
            assert ids(not_live) == {fleet["stale"], fleet["ended"]} == ids(rest)
            assert await call(client, "list_active_agents", live=True) == await call(
                client, "list_active_agents"
            )

    run(scenario)


def test_live_null_lists_every_session(mcp_url, raw_key, fleet, api):
    everything = api.get("/api/v1/sessions/").json()

    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            listed = await call(client, "list_active_agents", live=None)
            assert ids(listed) == set(fleet.values()) == ids(everything)
            bad = await refused(client, "list_active_agents", live="sometimes")
            assert bad["code"] == "invalid" and "live" in bad["errors"]

    run(scenario)


def test_the_schema_says_live_defaults_to_true(mcp_url, raw_key):
    async def scenario() -> None:
        async with connect(mcp_url, raw_key) as client:
            tool = {t.name: t for t in (await client.list_tools()).tools}["list_active_agents"]
            assert tool.input_schema["properties"]["live"] == {
                "type": ["boolean", "null"],
                "default": True,
            }
            assert "live=false" in (tool.description or "")

    run(scenario)


def test_defaults_are_for_query_parameters_only():
    spec = TOOLS_BY_NAME["list_active_agents"]
    assert spec.defaults == {"live": True}
    with pytest.raises(ValueError, match="GET"):
        type(spec)("x", "POST", "/api/v1/x/", "X", defaults={"live": True})
