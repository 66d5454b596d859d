"""The event log (invariant 12 (one event per change)) from every entry point: the demo's history
announces every change of its logs, and the MCP tools announce their changes as the API does."""

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from coordination.models import (
    AgentSession,
    ApiKey,
    Event,
    EventType,
    FileClaim,
    IssueLease,
    Message,
    ResourceHold,
    Run,
    Workspace,
)
from tests.coordination.mcp.conftest import call, connect, run
from tests.coordination.services.events_helpers import REPORT, cursor, since, types_since

pytestmark = pytest.mark.django_db


# --- every entry point: the demo's history, MCP ---------------------------------------


def test_the_demo_history_announces_every_change_of_its_logs():
    call_command("seed_demo", "--agents", "6", "--days", "3", stdout=StringIO())
    demo = Workspace.objects.get(slug="demo")

    def announced(type: str, **data: Any) -> int:
        rows = Event.objects.filter(workspace=demo, type=type)
        for key, value in data.items():
            rows = rows.filter(**{f"data__{key}": value})
        return rows.count()

    leases = IssueLease.objects.filter(workspace=demo)
    assert announced(EventType.LEASE_GRANTED) == leases.count() > 0
    assert announced(EventType.LEASE_RELEASED) == leases.filter(released_at__isnull=False).count()
    for reason in ("released", "expired", "agent_ended", "issue_closed"):
        assert announced(EventType.LEASE_RELEASED, reason=reason) == (
            leases.filter(release_reason=reason).count()
        ), reason
    assert announced(EventType.MESSAGE_POSTED) == Message.objects.filter(workspace=demo).count()
    assert announced(EventType.SESSION_REGISTERED) == (
        AgentSession.objects.filter(workspace=demo).count()
    )
    granted = sum(
        len(event.data["paths"])
        for event in Event.objects.filter(workspace=demo, type=EventType.CLAIMS_GRANTED)
    )
    assert granted == FileClaim.objects.filter(workspace=demo).count()
    assert announced(EventType.RUN_DISPATCHED) + announced(EventType.RUN_NOT_STARTED) == (
        Run.objects.filter(workspace=demo).count()
    )
    holds = ResourceHold.objects.filter(workspace=demo)
    assert announced(EventType.RESOURCE_ACQUIRED, resource="test-db") == holds.count() > 0
    for reason in ("released", "expired", "agent_ended"):
        assert announced(EventType.RESOURCE_RELEASED, reason=reason) == (
            holds.filter(release_reason=reason).count()
        ), reason
    assert announced(EventType.RESOURCE_RELEASED) == holds.filter(released_at__isnull=False).count()


@pytest.mark.django_db(transaction=True)
def test_mcp_tools_announce_their_changes_as_the_api_does(live_server, workspace, make_issue):
    raw = ApiKey.issue(workspace, "mcp")[1]
    issue = make_issue(status="todo")
    mark = cursor()

    async def scenario() -> None:
        async with connect(f"{live_server.url}/mcp", raw) as client:
            started = await call(
                client, "start_work", agent="mcp-coder", issue=issue.pk, paths=["m.py"]
            )
            await call(
                client,
                "post_message",
                scope=f"issue:{issue.pk}",
                body="Halfway.",
                session=started["session"]["id"],
            )
            await call(
                client,
                "finish_work",
                session=started["session"]["id"],
                issue=issue.pk,
                report=REPORT,
            )

    run(scenario)
    assert types_since(mark) == [
        EventType.SESSION_REGISTERED,
        EventType.LEASE_GRANTED,
        EventType.CLAIMS_GRANTED,
        EventType.ISSUE_TRANSITIONED,
        EventType.MESSAGE_POSTED,
        EventType.MESSAGE_POSTED,
        EventType.ISSUE_TRANSITIONED,
        EventType.MESSAGE_POSTED,
        EventType.CLAIMS_RELEASED,
        EventType.LEASE_RELEASED,
        EventType.SESSION_ENDED,
    ]
    assert {e["agent"] for e in since(mark, EventType.LEASE_GRANTED)} == {"mcp-coder"}
