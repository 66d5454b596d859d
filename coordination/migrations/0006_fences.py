"""Fences (docs/api.md, "Fences"): every lease and every worktree lock carries a number
that grows with each new lease of its issue (lock of its worktree) and is never reused.

Existing rows are numbered 1, 2, 3, ... per issue (per worktree) in id order, the
order they were taken in; the unique constraints then make "never reused" a property
of the database. Only ``issue_leases`` and ``coordination_worktreelock`` change: no
workspace-link guard of 0003 lives on them or names them, so SQLite's rebuild of
these two tables leaves the guards alone (tests/coordination/test_workspace_links.py).
"""

from django.db import migrations, models

# (table, the column fences are counted per)
FENCED = [("issue_leases", "issue_id"), ("coordination_worktreelock", "worktree_id")]


def number_existing_rows(apps, schema_editor) -> None:
    for table, owner in FENCED:
        if schema_editor.connection.vendor == "postgresql":
            sql = f"""
                UPDATE {table} AS t SET fence = numbered.n
                FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY {owner} ORDER BY id) AS n
                      FROM {table}) AS numbered
                WHERE numbered.id = t.id
            """
        else:  # SQLite before 3.33 has no UPDATE ... FROM; a correlated count is portable
            sql = f"""
                UPDATE {table} SET fence = (
                    SELECT COUNT(*) FROM {table} AS earlier
                    WHERE earlier.{owner} = {table}.{owner} AND earlier.id <= {table}.id)
            """
        schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("coordination", "0005_issue_priority_and_report"),
    ]

    operations = [
        migrations.AddField(
            model_name="issuelease",
            name="fence",
            field=models.PositiveIntegerField(default=1, editable=False),
        ),
        migrations.AddField(
            model_name="worktreelock",
            name="fence",
            field=models.PositiveIntegerField(default=1, editable=False),
        ),
        migrations.RunPython(number_existing_rows, migrations.RunPython.noop, elidable=False),
        migrations.AddConstraint(
            model_name="issuelease",
            constraint=models.UniqueConstraint(
                fields=("issue", "fence"), name="lease_fence_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="worktreelock",
            constraint=models.UniqueConstraint(
                fields=("worktree", "fence"), name="lock_fence_unique"
            ),
        ),
    ]
