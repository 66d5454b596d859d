"""Migration 0014: the database defaults ``requires_filesystem`` to false, and every
trigger on the issue table or naming it (SQLite rebuilds the table) is still there
afterwards, as it was, both ways."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("coordination", "0013_release_history_indexes")]
AFTER = [("coordination", "0014_issue_requires_filesystem_default")]


def migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


def triggers() -> list[tuple[str, ...]]:
    """Every trigger of the database, with its definition."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name"
            )
        else:
            cursor.execute(
                "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger"
                " WHERE NOT tgisinternal ORDER BY tgname"
            )
        return [tuple(row) for row in cursor.fetchall()]


def column_default() -> str | None:
    with connection.cursor() as cursor:
        described = connection.introspection.get_table_description(cursor, "coordination_issue")
    (column,) = [c for c in described if c.name == "requires_filesystem"]
    return column.default


@pytest.mark.django_db(transaction=True)
def test_the_default_comes_and_goes_and_the_triggers_stay():
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    now = triggers()
    try:
        migrate(AFTER)  # later migrations undone: the triggers as 0014 leaves them
        left = triggers()
        assert any("same_workspace" in row[0] for row in left)  # the guards of 0003
        assert column_default() is not None
        migrate(BEFORE)
        assert column_default() is None
        assert triggers() == left
        migrate(AFTER)
        assert column_default() is not None
        assert triggers() == left
    finally:
        migrate(latest)
    assert triggers() == now
