"""An issue needs no filesystem unless it says so, in the database too: a row inserted
without ``requires_filesystem`` (a raw INSERT, a bulk load) gets false, as the seed's
``INTEGER NOT NULL DEFAULT 0`` has it.

PostgreSQL sets the column's default in place. SQLite changes a default only by
rebuilding the table (copy, drop, rename), which drops the table's own triggers and
refuses the rename while another table's trigger names the missing table (the
workspace-link guards of 0003 on worktree, project and agent; the heatmap's rollup
triggers on claims and conflicts). So every trigger that is on the issue table or
names it is set aside in a temporary table and dropped, and after the rebuild put
back exactly as it was, both ways: this migration installs no trigger SQL of its own.
"""

from django.db import migrations, models

TABLE = "coordination_issue"
SET_ASIDE = "projektor_issue_triggers"  # a TEMP table: gone with the connection


def set_triggers_aside(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "sqlite":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE {SET_ASIDE} AS SELECT name, sql FROM sqlite_master"
            " WHERE type = 'trigger' AND (tbl_name = %s OR instr(sql, %s) > 0)",
            [TABLE, TABLE],
        )
        cursor.execute(f"SELECT name FROM temp.{SET_ASIDE} ORDER BY name")
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP TRIGGER "{name}"')


def put_triggers_back(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "sqlite":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT sql FROM temp.{SET_ASIDE} ORDER BY name")
        for (sql,) in cursor.fetchall():
            cursor.execute(sql)
        cursor.execute(f"DROP TABLE temp.{SET_ASIDE}")


class Migration(migrations.Migration):
    dependencies = [
        ("coordination", "0013_release_history_indexes"),
    ]

    operations = [
        migrations.RunPython(set_triggers_aside, put_triggers_back),
        migrations.AlterField(
            model_name="issue",
            name="requires_filesystem",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.RunPython(put_triggers_back, set_triggers_aside),
    ]
