"""The heatmap's triggers as its migrations install them are the ones
``heatmap.rollups`` generates today (invariants 14 (rollups) and 15 (day counts)), on SQLite and
PostgreSQL.

Each migration carries its SQL frozen, so an upgraded database keeps the SQL of its
last migration: a change to the generated SQL without a migration that installs it
fails here. Both sides are read back from the database's catalogue (SQLite keeps a
trigger's text as written; PostgreSQL prints its own form of a trigger and of its
function), the generated side by installing it in a transaction rolled back after.
"""

import re

import pytest
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor

from heatmap.rollups import day_counts, triggers

WITHOUT_TRIGGERS = [("heatmap", "0001_rollups")]
PREFIX = "heatmap_"


def migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def installed() -> dict[str, tuple[str, ...]]:
    """Every heatmap trigger and trigger function in the database, by name: SQLite's
    text of each trigger; PostgreSQL's definition of each trigger and of each function
    (its body as written)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t"
                " WHERE NOT t.tgisinternal"
            )
            found = {f"trigger {name}": (sql,) for name, sql in cursor.fetchall()}
            cursor.execute(
                "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p"
                " JOIN pg_namespace s ON s.oid = p.pronamespace"
                " WHERE s.nspname = current_schema() AND p.prorettype = 'trigger'::regtype"
            )
            found |= {f"function {name}": (sql,) for name, sql in cursor.fetchall()}
        else:
            cursor.execute(
                "SELECT 'trigger ' || name, sql FROM sqlite_master WHERE type = 'trigger'"
            )
            found = {name: (sql,) for name, sql in cursor.fetchall()}
    return {name: sql for name, sql in found.items() if name.split()[1].startswith(PREFIX)}


def generated_names() -> set[str]:
    """The triggers and functions today's code creates, by name."""
    statements = triggers.creating(connection.vendor) + day_counts.creating(connection.vendor)
    return {
        f"{kind.lower()} {name}"
        for statement in statements
        for kind, name in re.findall(r"CREATE (?:OR REPLACE )?(TRIGGER|FUNCTION) (\w+)", statement)
    }


def generated() -> dict[str, tuple[str, ...]]:
    """What the database holds once today's SQL is installed over the migrations'."""
    with transaction.atomic():
        triggers.install(connection)
        definitions = installed()
        transaction.set_rollback(True)
    return definitions


@pytest.mark.django_db(transaction=True)
def test_the_migrations_install_the_triggers_the_code_generates():
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        migrate(WITHOUT_TRIGGERS)  # every trigger gone, then each migration's own again
        assert installed() == {}
    finally:
        migrate(latest)
    migrated = installed()
    assert set(migrated) == generated_names(), "a trigger missing, or one the code no longer makes"
    today = generated()
    assert set(today) == set(migrated)
    changed = sorted(name for name in migrated if migrated[name] != today[name])
    assert not changed, (
        f"{changed} differ from the SQL heatmap.rollups generates today: a change to it needs"
        " a migration that carries the new SQL and installs it"
    )
