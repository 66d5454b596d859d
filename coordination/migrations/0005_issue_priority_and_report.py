import importlib

from django.db import migrations, models

# SQLite adds a NOT NULL column by rebuilding the table (copy, drop, rename), which
# the workspace-link guards of 0003 do not survive: their triggers on the issue table
# are dropped with it, and the ones on worktree, project and agent name the issue
# table, so the rename refuses while it is gone. The guards are taken down around the
# rebuild and put back after it, both ways. PostgreSQL alters in place: nothing to do.
guards = importlib.import_module("coordination.migrations.0003_workspace_links")


def drop_sqlite_guards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        guards.remove_guards(apps, schema_editor)


def install_sqlite_guards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        guards.install_guards(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("coordination", "0004_database_stamps_not_editable"),
    ]

    operations = [
        migrations.RunPython(drop_sqlite_guards, install_sqlite_guards),
        migrations.AddField(
            model_name="issue",
            name="priority",
            field=models.PositiveSmallIntegerField(
                choices=[(0, "None"), (1, "Urgent"), (2, "High"), (3, "Medium"), (4, "Low")],
                default=0,
                db_default=0,  # raw inserts (benchmarks, psql) get "none" too
            ),
        ),
        migrations.AddField(
            model_name="issue",
            name="report",
            field=models.JSONField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(install_sqlite_guards, drop_sqlite_guards),
    ]
