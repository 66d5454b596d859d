"""Migration 0016: progress and the age of a lease. Every trigger of the session and
project tables, or naming them (SQLite rebuilds both), is still there afterwards, as it
was, both ways; the progress trigger on the event log comes and goes with it; a
session already open starts from its last heartbeat."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.coordination.test_migration_0014_requires_filesystem_default import migrate, triggers

BEFORE = [("coordination", "0015_work_graph")]
AFTER = [("coordination", "0016_progress_and_lease_age")]
PROGRESS = "coordination_event_progress"


def progress_triggers() -> list[tuple[str, ...]]:
    return [row for row in triggers() if row[0] == PROGRESS]


@pytest.mark.django_db(transaction=True)
def test_the_progress_trigger_comes_and_goes_and_the_others_stay():
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    now = triggers()
    try:
        migrate(AFTER)
        left = triggers()
        assert progress_triggers()
        assert any("same_workspace" in row[0] for row in left)  # the guards of 0003
        migrate(BEFORE)
        assert not progress_triggers()
        assert triggers() == [row for row in left if row[0] != PROGRESS]
        with connection.cursor() as cursor:  # a session open before the upgrade
            cursor.execute(
                "INSERT INTO coordination_workspace (slug, name, created_at,"
                " events_pruned_through) VALUES ('old', 'Old', '2026-01-01 00:00:00', 0)"
            )
            cursor.execute("SELECT id FROM coordination_workspace WHERE slug = 'old'")
            (workspace,) = cursor.fetchone()
            cursor.execute(
                "INSERT INTO coordination_agent (workspace_id, name, role, department,"
                " created_at) VALUES (%s, 'a', '', '', '2026-01-01 00:00:00')",
                [workspace],
            )
            cursor.execute("SELECT id FROM coordination_agent WHERE workspace_id = %s", [workspace])
            (agent,) = cursor.fetchone()
            cursor.execute(
                "INSERT INTO agent_sessions (workspace_id, agent_id, status, started_at,"
                " last_heartbeat_at) VALUES (%s, %s, 'active', '2026-01-01 00:00:00',"
                " '2026-01-01 00:05:00')",
                [workspace, agent],
            )
        migrate(AFTER)
        assert triggers() == left
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT last_progress_at = last_heartbeat_at FROM agent_sessions"
                " WHERE workspace_id = %s",
                [workspace],
            )
            assert cursor.fetchone()[0]
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM agent_sessions WHERE workspace_id IN"
                " (SELECT id FROM coordination_workspace WHERE slug = 'old')"
            )
            cursor.execute(
                "DELETE FROM coordination_agent WHERE workspace_id IN"
                " (SELECT id FROM coordination_workspace WHERE slug = 'old')"
            )
            cursor.execute("DELETE FROM coordination_workspace WHERE slug = 'old'")
        migrate(latest)
    assert triggers() == now
