"""Resources on the managers' pages (invariant 20 (resources are counted)): the health
page's section (each resource in use of its capacity, its holders linked, its line, the
calls refused per day), what an agent and an issue hold, and the issue's timeline in
words; a fixed number of statements however many resources and holds."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from coordination.errors import ResourceBusy
from coordination.models import Event, ResourceWait
from coordination.services import resources
from heatmap.resources import refusals_per_day, slot_words
from tests.conftest import expire
from tests.heatmap.test_pages import embedded_json

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def refuse(workspace, name: str, session, **kwargs) -> None:
    with pytest.raises(ResourceBusy):
        resources.acquire(workspace=workspace, name=name, session_id=session.pk, **kwargs)


@pytest.fixture
def pool(workspace, make_issue, make_session):
    """``db:test`` (1) held by coder-1 for #fix, and refused to coder-3 twice; ``ports``
    (4): 2 units held by coder-2, 1 by a session that died (free again), one call
    waiting in its line; ``idle`` (3) unused."""
    fix = make_issue(title="Fix the flaky login test")
    one, two, three = make_session("coder-1"), make_session("coder-2"), make_session("coder-3")
    gone = make_session("coder-9")
    resources.create_resource(
        workspace=workspace, name="db:test", description="The CI database, one at a time."
    )
    resources.create_resource(workspace=workspace, name="ports", capacity=4)
    resources.create_resource(workspace=workspace, name="idle", capacity=3)
    resources.acquire(workspace=workspace, name="db:test", session_id=one.pk, issue_id=fix.pk)
    resources.acquire(workspace=workspace, name="ports", session_id=two.pk, units=2)
    resources.acquire(workspace=workspace, name="ports", session_id=gone.pk)
    expire(gone)
    refuse(workspace, "db:test", three, issue_id=fix.pk)
    refuse(workspace, "db:test", three)
    ResourceWait.objects.create(
        workspace=workspace,
        resource=resources.get_resource(workspace, "ports"),
        session=three,
        units=3,
        deadline=timezone.now() + timedelta(seconds=60),
    )
    return {"fix": fix, "one": one, "two": two, "three": three}


def section(body: str) -> str:
    start = body.index('id="resources"')
    return body[start : body.index('id="chart-conflicts"')]


def row(html: str, name: str) -> str:
    match = re.search(rf'<tr[^>]*data-resource="{re.escape(name)}">(.*?)</tr>', html, re.S)
    assert match, f"no row for {name}"
    return match.group(1)


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


# --- the health page --------------------------------------------------------------------


def test_health_shows_each_resource_in_use_of_capacity_its_holders_and_its_line(
    alice, workspace, pool
):
    response = logged_in(alice).get("/workspaces/acme/health/")
    assert response.status_code == 200
    html = section(response.content.decode())
    assert [r.name for r in response.context["resources"].resources] == [
        "db:test",
        "idle",
        "ports",
    ]

    db = row(html, "db:test")
    assert "1 of 1" in text(db) and '<span class="tag bad">full</span>' in db
    assert 'href="/workspaces/acme/agents/coder-1/"' in db
    assert f'href="/workspaces/acme/issues/{pool["fix"].pk}/"' in db
    assert "Fix the flaky login test" in db and "1 unit, slot 0" in text(db)
    assert "The CI database, one at a time." in db
    assert re.search(r'class="num refused">2<', db)

    ports = row(html, "ports")
    assert "2 of 4" in text(ports) and "full" not in ports  # the dead session's unit is free
    assert 'href="/workspaces/acme/agents/coder-2/"' in ports
    assert "coder-9" not in ports  # not a holder: its session is not live
    assert "2 units, slots 0\u20131" in text(ports)
    assert re.search(r'class="num waiting"><span class="tag bad"[^>]*>1<', ports)

    idle = row(html, "idle")
    assert "0 of 3" in text(idle) and "nobody" in idle

    traces = embedded_json(response, "resource-refusals-data")["data"]
    assert {trace["name"]: sum(trace["y"]) for trace in traces} == {
        "db:test": 2,
        "idle": 0,
        "ports": 0,
    }


def test_health_says_so_when_the_workspace_has_no_resources(alice, workspace, other_workspace):
    resources.create_resource(workspace=other_workspace, name="theirs")  # not ours
    response = logged_in(alice).get("/workspaces/acme/health/")
    body = response.content.decode()
    assert "No resources in this workspace" in body
    assert "resource-refusals-data" not in body and "theirs" not in body


def test_no_refusal_in_the_window_is_said_under_the_chart(alice, workspace, make_session):
    resources.create_resource(workspace=workspace, name="db:test")
    resources.acquire(workspace=workspace, name="db:test", session_id=make_session().pk)
    body = logged_in(alice).get("/workspaces/acme/health/").content.decode()
    assert "No call was refused in this window." in section(body)


def test_refusals_are_counted_per_utc_day_and_resource_in_the_window(workspace, make_session):
    resources.create_resource(workspace=workspace, name="db:test")
    resources.create_resource(workspace=workspace, name="ports")
    holder, wanter = make_session("holder"), make_session("wanter")
    for name in ("db:test", "ports"):
        resources.acquire(workspace=workspace, name=name, session_id=holder.pk)
    for name in ("db:test", "db:test", "ports"):
        refuse(workspace, name, wanter)
    Event.objects.create(  # nine days ago: out of the window
        workspace=workspace,
        type="resource.refused",
        occurred_at=timezone.now() - timedelta(days=9),
        data={"resource": "db:test", "units": 1, "holders": []},
    )
    until = timezone.now() + timedelta(minutes=1)
    daily = refusals_per_day(workspace, ["db:test", "ports"], until - timedelta(days=3), until)
    assert daily.days[-1] == until.astimezone(UTC).date()
    assert sum(daily.series["db:test"]) == 2 and daily.series["db:test"][-1] == 2  # not 9 days
    assert sum(daily.series["ports"]) == 1
    assert daily.total == 3


def test_refusals_fall_on_their_utc_day_either_side_of_midnight(workspace):
    midnight = datetime(2026, 11, 2, tzinfo=UTC)
    for at in (midnight - timedelta(microseconds=1), midnight, midnight + timedelta(hours=23)):
        Event.objects.create(
            workspace=workspace,
            type="resource.refused",
            occurred_at=at,
            data={"resource": "db:test", "units": 1, "holders": []},
        )
    Event.objects.create(  # another type of the same resource is not a refusal
        workspace=workspace,
        type="resource.acquired",
        occurred_at=midnight,
        data={"resource": "db:test"},
    )
    day = timedelta(days=1)
    daily = refusals_per_day(workspace, ["db:test"], midnight - day, midnight + day)
    assert daily.series == {"db:test": [1, 2]}


def health_statements(client: Client) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get("/workspaces/acme/health/").status_code == 200
    return len(captured)


def test_the_section_costs_the_same_statements_for_2_and_12_resources(
    alice, workspace, make_session
):
    client = logged_in(alice)

    def add(first: int, count: int) -> None:
        for n in range(first, first + count):
            resources.create_resource(workspace=workspace, name=f"pool-{n}", capacity=3)
            for k in range(2):
                session = make_session(f"coder-{n}-{k}")
                resources.acquire(workspace=workspace, name=f"pool-{n}", session_id=session.pk)
            refuse(workspace, f"pool-{n}", make_session(f"late-{n}"), units=2)

    add(0, 2)
    few = health_statements(client)
    add(2, 10)
    assert health_statements(client) == few


# --- the agent's and the issue's pages ------------------------------------------------------


def test_the_agent_page_lists_the_live_holds_of_the_agent(alice, workspace, pool, make_session):
    body = logged_in(alice).get("/workspaces/acme/agents/coder-1/").content.decode()
    holdings = body[body.index('id="holdings"') : body.index("<h2>Sessions")]
    table = holdings[holdings.index('id="agent-resources"') :]
    assert "db:<wbr>test</code>" in table and "slot 0" in table
    assert f'href="/workspaces/acme/issues/{pool["fix"].pk}/"' in table
    assert 'href="/workspaces/acme/health/#resources"' in table

    two = logged_in(alice).get("/workspaces/acme/agents/coder-2/").content.decode()
    assert ">ports</code>" in two and "slots 0\u20131" in two

    body = logged_in(alice).get("/workspaces/acme/agents/coder-9/").content.decode()
    assert 'id="agent-resources"' not in body  # its session died: nothing is held
    assert "No resources held." in body


def test_the_issue_page_lists_what_is_held_for_it(alice, workspace, pool, make_issue):
    body = logged_in(alice).get(f"/workspaces/acme/issues/{pool['fix'].pk}/").content.decode()
    holds = body[body.index('id="holds"') : body.index("Timeline")]
    table = holds[holds.index('id="resource-holds"') :]
    assert "db:<wbr>test</code>" in table and 'href="/workspaces/acme/agents/coder-1/"' in table
    assert f"session {pool['one'].pk}" in table and "slot 0" in table

    other = make_issue(title="Nothing held")
    body = logged_in(alice).get(f"/workspaces/acme/issues/{other.pk}/").content.decode()
    assert "No resources held for it." in body


def test_the_issue_s_timeline_tells_its_resource_events_in_words(
    alice, workspace, pool, make_session
):
    fix = pool["fix"]
    hold = resources.acquire(
        workspace=workspace, name="idle", session_id=pool["one"].pk, units=2, issue_id=fix.pk
    ).hold
    resources.force_release(hold=hold, operator="ops")
    body = logged_in(alice).get(f"/workspaces/acme/issues/{fix.pk}/").content.decode()
    timeline = body[body.index('id="timeline"') :]

    def entry(kind: str) -> str:
        found = re.findall(rf'data-kind="{re.escape(kind)}">(.*?)</li>', timeline, re.S)
        assert found, kind
        return text(found[0])  # the newest

    assert f"coder-1 acquired 2 units of idle (slots 0\u20131, fence {hold.fence})" in entry(
        "resource.acquired"
    )
    assert "Hold on idle of coder-1 released by operator ops" in entry("resource.released")
    refused = entry("resource.refused")
    assert "coder-3 was refused db:test: 0 free, held by coder-1" in refused
    assert 'class="entry bad" data-kind="resource.refused"' in timeline


def test_slots_read_as_ranges():
    assert slot_words([0]) == "slot 0"
    assert slot_words([0, 1, 2, 3]) == "slots 0\u20133"
    assert slot_words([5, 0, 2, 3, 4]) == "slots 0, 2\u20135"
    assert slot_words([1, 3]) == "slots 1, 3"
