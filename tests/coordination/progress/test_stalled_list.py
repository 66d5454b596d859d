"""GET /sessions/?stalled=true (invariant 17 (stalled is derived)) reads the live range of the
active sessions' heartbeat index, bounded by the fleet: neither the sessions that ended nor
those that died without ending are read, and the number of statements is the same
however many there are (both databases)."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from coordination.db import sql
from coordination.db.rows import dialect
from coordination.db.sql.sessions import LIVE_SESSIONS
from coordination.models import Agent, AgentSession, Workspace
from tests.api_helpers import V1

pytestmark = pytest.mark.django_db

STALL_AFTER = 60


@pytest.fixture(autouse=True)
def _short_stall(settings):
    settings.PROJEKTOR_STALL_AFTER_SECONDS = STALL_AFTER
    # Off: their counter is a statement of its own on PostgreSQL's database cache.
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"key": None, "anon": None},
    }


def fleet(workspace: Workspace, *, ended: int, dead: int, moving: int, stalled: int) -> None:
    """Sessions of every kind: ended, died without ending (active, heartbeat and
    progress long past), live and moving, live and stalled."""
    now, old = timezone.now(), timezone.now() - timedelta(hours=5)
    agent = Agent.objects.create(workspace=workspace, name="coder")

    def rows(count: int, beat, progress, status: str = "active") -> list[AgentSession]:
        return [
            AgentSession(
                workspace=workspace,
                agent=agent,
                status=status,
                last_heartbeat_at=beat,
                last_progress_at=progress,
            )
            for _ in range(count)
        ]

    AgentSession.objects.bulk_create(
        rows(ended, old, old, "ended")
        + rows(dead, old, old)
        + rows(moving, now, now)
        + rows(stalled, now, old)
    )


def plan(statement: str, params: list) -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"ANALYZE {AgentSession._meta.db_table}")
            cursor.execute(f"EXPLAIN {statement}", params)
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {statement}", params)
        return "\n".join(str(row) for row in cursor.fetchall())


def test_the_hinted_index_is_the_models():
    names = [index.name for index in AgentSession._meta.indexes]
    assert LIVE_SESSIONS in names


def test_the_stalled_filter_reads_the_live_range_of_the_heartbeat_index(workspace):
    fleet(workspace, ended=1500, dead=1500, moving=300, stalled=5)
    d = dialect()
    listed = sql.SessionList(workspace_id=workspace.pk, stalled=True)
    counted = plan(*sql.session_count(d, listed))
    assert LIVE_SESSIONS in counted, counted
    assert "session_active_progress_idx" not in counted, counted
    # Not the workspace's sessions, one by one.
    assert "Seq Scan" not in counted and "SCAN agent_sessions" not in counted, counted
    # A short page tempts PostgreSQL to walk the sessions newest first (its primary
    # key) in the hope of meeting a stalled one soon: it must not.
    for limit in (100, 1):
        page = plan(*sql.session_page(d, listed, limit=limit, offset=0))
        assert LIVE_SESSIONS in page, page
        assert "session_active_progress_idx" not in page, page
        assert "Index Scan Backward" not in page, page


@pytest.mark.parametrize("rows", [1, 20])
def test_the_stalled_list_costs_the_same_however_many_sessions_of_any_kind(
    api, workspace, rows, django_assert_num_queries
):
    fleet(workspace, ended=rows, dead=rows, moving=rows, stalled=rows)
    # The key's lookup, the count and the page.
    with django_assert_num_queries(3):
        response = api.get(f"{V1}/sessions/?stalled=true")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == rows and len(body["results"]) == rows
    assert all(row["stalled"] and row["live"] for row in body["results"])


def test_the_stalled_filter_combines_with_the_agents_name(api, workspace):
    fleet(workspace, ended=2, dead=2, moving=2, stalled=3)
    listed = api.get(f"{V1}/sessions/?stalled=true&agent=coder").json()
    assert listed["count"] == 3
    assert api.get(f"{V1}/sessions/?stalled=true&agent=nobody").json()["count"] == 0
    others = api.get(f"{V1}/sessions/?stalled=false&agent=coder").json()
    assert others["count"] == 6
