"""The key ring's version: what lets an app server keep a key it has read
(``coordination.services.keys``) and still see every change on the next request.

``coordination_key_ring_version`` holds one counter per workspace. Triggers bump it
in the transaction of any UPDATE or DELETE of the workspace's API keys or agents, or
of the workspace itself (a deleted workspace's counter goes with it); inserts need no
bump, since nothing cached names a row that did not exist. A key read from the
database carries the counter read by the same statement; a later request's one
statement reads the key's row (revoked? expired, by the database's clock?) and the
counter, and the copy serves only while the counter is unchanged.

The SQL is this migration's own, frozen as it was written. SQLite drops a table's
triggers when Django rebuilds it: a later migration that rebuilds coordination_apikey,
coordination_agent or coordination_workspace sets them aside and puts them back
(``tests/coordination/test_migration_0018_key_ring_version.py`` checks that they are
in place after ``migrate``).
"""

from django.core.management.base import CommandError
from django.db import migrations, models

RING = "coordination_key_ring_version"
BUMP_SQLITE = (
    f"INSERT INTO {RING} (workspace_id, version) VALUES ({{workspace}}, 1)"
    " ON CONFLICT (workspace_id) DO UPDATE SET version = version + 1;"
)

SQLITE_INSTALL = [
    f"""CREATE TRIGGER key_ring_{name}_{event.lower()} AFTER {event} ON {table}
FOR EACH ROW BEGIN {BUMP_SQLITE.format(workspace=f"OLD.{column}")} END"""
    for name, table, column in (
        ("apikey", "coordination_apikey", "workspace_id"),
        ("agent", "coordination_agent", "workspace_id"),
        ("workspace", "coordination_workspace", "id"),
    )
    for event in ("UPDATE", "DELETE")
    if (name, event) != ("workspace", "DELETE")
] + [
    f"""CREATE TRIGGER key_ring_workspace_delete AFTER DELETE ON coordination_workspace
FOR EACH ROW BEGIN DELETE FROM {RING} WHERE workspace_id = OLD.id; END"""
]

SQLITE_REMOVE = [
    f"DROP TRIGGER IF EXISTS key_ring_{name}_{event}"
    for name in ("apikey", "agent", "workspace")
    for event in ("update", "delete")
]

POSTGRES_INSTALL = [
    f"""CREATE FUNCTION key_ring_bump_member() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {RING} (workspace_id, version) VALUES (OLD.workspace_id, 1)
    ON CONFLICT (workspace_id) DO UPDATE SET version = {RING}.version + 1;
    RETURN NULL;
END
$$""",
    f"""CREATE FUNCTION key_ring_bump_workspace() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM {RING} WHERE workspace_id = OLD.id;
    ELSE
        INSERT INTO {RING} (workspace_id, version) VALUES (OLD.id, 1)
        ON CONFLICT (workspace_id) DO UPDATE SET version = {RING}.version + 1;
    END IF;
    RETURN NULL;
END
$$""",
    """CREATE TRIGGER key_ring_apikey AFTER UPDATE OR DELETE ON coordination_apikey
FOR EACH ROW EXECUTE FUNCTION key_ring_bump_member()""",
    """CREATE TRIGGER key_ring_agent AFTER UPDATE OR DELETE ON coordination_agent
FOR EACH ROW EXECUTE FUNCTION key_ring_bump_member()""",
    """CREATE TRIGGER key_ring_workspace AFTER UPDATE OR DELETE ON coordination_workspace
FOR EACH ROW EXECUTE FUNCTION key_ring_bump_workspace()""",
]

POSTGRES_REMOVE = [
    "DROP TRIGGER IF EXISTS key_ring_apikey ON coordination_apikey",
    "DROP TRIGGER IF EXISTS key_ring_agent ON coordination_agent",
    "DROP TRIGGER IF EXISTS key_ring_workspace ON coordination_workspace",
    "DROP FUNCTION IF EXISTS key_ring_bump_member()",
    "DROP FUNCTION IF EXISTS key_ring_bump_workspace()",
]

TRIGGERS = {
    "sqlite": (SQLITE_INSTALL, SQLITE_REMOVE),
    "postgresql": (POSTGRES_INSTALL, POSTGRES_REMOVE),
}


def triggers(vendor: str) -> tuple[list[str], list[str]]:
    if vendor not in TRIGGERS:
        raise CommandError(
            f"coordination 0018: no key ring triggers for database {vendor!r}; "
            f"Projektor supports SQLite and PostgreSQL."
        )
    return TRIGGERS[vendor]


def install_triggers(apps, schema_editor) -> None:
    install, _ = triggers(schema_editor.connection.vendor)
    for statement in install:
        schema_editor.execute(statement, params=None)


def remove_triggers(apps, schema_editor) -> None:
    _, remove = triggers(schema_editor.connection.vendor)
    for statement in remove:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("coordination", "0017_work_graph_workspace_guards"),
    ]

    operations = [
        migrations.CreateModel(
            name="KeyRingVersion",
            fields=[
                ("workspace_id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("version", models.BigIntegerField(default=0)),
            ],
            options={
                "db_table": RING,
            },
        ),
        migrations.RunPython(install_triggers, remove_triggers, elidable=False),
    ]
