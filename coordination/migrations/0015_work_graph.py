"""The work graph (invariant 16 (the work graph)): links between issues, and the paths an issue
expects to touch, stored with the probes the ready queue's collision check looks
claims up by.

On PostgreSQL the expected paths compare byte for byte, as the claims' paths do
(0011): the collision check compares them with claim paths, by equality and by
subtree range, and two columns of different collations cannot be compared.
"""

import django.db.models.deletion
from django.db import migrations, models

import coordination.liveness

TABLE = "issue_expected_paths"
BYTEWISE = ("path", "probe", "subtree_end")


def to_bytewise(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for column in BYTEWISE:
            schema_editor.execute(
                f'ALTER TABLE {TABLE} ALTER COLUMN {column} TYPE varchar(1024) COLLATE "C"'
            )


class Migration(migrations.Migration):
    dependencies = [
        ("coordination", "0014_issue_requires_filesystem_default"),
    ]

    operations = [
        migrations.AlterField(
            model_name="event",
            name="type",
            field=models.CharField(
                choices=[
                    ("session.registered", "Session Registered"),
                    ("session.ended", "Session Ended"),
                    ("lease.granted", "Lease Granted"),
                    ("lease.released", "Lease Released"),
                    ("claims.granted", "Claims Granted"),
                    ("claims.released", "Claims Released"),
                    ("claims.refused", "Claims Refused"),
                    ("wip.denied", "Wip Denied"),
                    ("issue.created", "Issue Created"),
                    ("issue.transitioned", "Issue Transitioned"),
                    ("issue.linked", "Issue Linked"),
                    ("issue.unlinked", "Issue Unlinked"),
                    ("issue.unblocked", "Issue Unblocked"),
                    ("run.dispatched", "Run Dispatched"),
                    ("run.finished", "Run Finished"),
                    ("run.not_started", "Run Not Started"),
                    ("message.posted", "Message Posted"),
                ],
                max_length=32,
            ),
        ),
        migrations.CreateModel(
            name="ExpectedPath",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("path", models.CharField(max_length=1024)),
                ("probe", models.CharField(max_length=1024)),
                ("subtree_end", models.CharField(blank=True, default="", max_length=1024)),
                (
                    "issue",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="expected_paths",
                        to="coordination.issue",
                    ),
                ),
                (
                    "workspace",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="coordination.workspace",
                    ),
                ),
            ],
            options={
                "db_table": "issue_expected_paths",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("issue", "path", "probe"), name="issue_expected_path_unique"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="IssueLink",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "type",
                    models.CharField(
                        choices=[
                            ("blocks", "Blocks"),
                            ("parent_of", "Parent Of"),
                            ("relates_to", "Relates To"),
                            ("discovered_from", "Discovered From"),
                        ],
                        max_length=20,
                    ),
                ),
                (
                    "created_at",
                    models.DateTimeField(db_default=coordination.liveness.DbNow(), editable=False),
                ),
                (
                    "source",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="outgoing_links",
                        to="coordination.issue",
                    ),
                ),
                (
                    "target",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="incoming_links",
                        to="coordination.issue",
                    ),
                ),
                (
                    "workspace",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="coordination.workspace",
                    ),
                ),
            ],
            options={
                "db_table": "issue_links",
                "indexes": [
                    models.Index(fields=["target", "type", "source"], name="issue_link_incoming")
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("source", "type", "target"), name="issue_link_unique"
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("type", "parent_of")),
                        fields=("target",),
                        name="issue_link_one_parent",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("source", models.F("target")), _negated=True),
                        name="issue_link_not_to_itself",
                    ),
                ],
            },
        ),
        migrations.RunPython(to_bytewise, migrations.RunPython.noop),
    ]
