"""claim_conflicts and wip_cap_denials are append-only in the database (invariant 8 (append-only logs)).

Triggers refuse every UPDATE and DELETE of their rows, on SQLite and PostgreSQL, with
an integrity error. The one way past them is ``projektor_log_unlock``: a row naming a
workspace lets its log rows change inside the transaction that wrote it, and
``coordination.services.logs.unlocked`` deletes it again before that transaction
commits, so no other transaction ever sees it. Deleting a whole workspace goes
through it (its logs go with it, and the SET NULL of their session columns is an
update).
Workspace id 0 stands for every workspace (maintenance, e.g. the test suite's
flush, which on SQLite deletes row by row).
"""

from django.db import migrations

LOGS = ("claim_conflicts", "wip_cap_denials")
UNLOCKED = (
    "EXISTS (SELECT 1 FROM projektor_log_unlock u "
    "WHERE u.workspace_id = OLD.workspace_id OR u.workspace_id = 0)"
)
MESSAGE = "{table} is append-only: its rows are never updated or deleted"


def sqlite_install(table: str) -> list[str]:
    return [
        f"CREATE TRIGGER {table}_append_only_{verb.lower()} BEFORE {verb} ON {table} "
        f"FOR EACH ROW WHEN NOT {UNLOCKED} "
        f"BEGIN SELECT RAISE(ABORT, '{MESSAGE.format(table=table)}'); END"
        for verb in ("UPDATE", "DELETE")
    ]


def postgres_install(table: str) -> list[str]:
    return [
        f"""
        CREATE FUNCTION {table}_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF {UNLOCKED} THEN
                RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
            END IF;
            RAISE EXCEPTION '{MESSAGE.format(table=table)}'
                USING ERRCODE = 'restrict_violation', CONSTRAINT = '{table}_append_only';
        END $$
        """,
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION {table}_append_only()",
    ]


def remove(vendor: str, table: str) -> list[str]:
    if vendor == "postgresql":
        return [
            f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}",
            f"DROP FUNCTION IF EXISTS {table}_append_only()",
        ]
    return [f"DROP TRIGGER IF EXISTS {table}_append_only_{verb}" for verb in ("update", "delete")]


def install_guards(apps, schema_editor) -> None:
    install = (
        postgres_install if schema_editor.connection.vendor == "postgresql" else sqlite_install
    )
    for table in LOGS:
        for statement in install(table):
            schema_editor.execute(statement, params=None)


def remove_guards(apps, schema_editor) -> None:
    for table in LOGS:
        for statement in remove(schema_editor.connection.vendor, table):
            schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("coordination", "0006_fences"),
    ]

    operations = [
        migrations.RunSQL(
            "CREATE TABLE projektor_log_unlock (workspace_id bigint PRIMARY KEY)",
            "DROP TABLE projektor_log_unlock",
        ),
        migrations.RunPython(install_guards, remove_guards, elidable=False),
    ]
