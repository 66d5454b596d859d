"""Progress and the age of a lease (invariant 17 (stalled is derived)).

A session's ``last_progress_at`` is set at registration (its default) and by every
change it makes: each event the change writes that is the session's own doing (a
claim, a release, a transition, a message, a run, a link) stamps it, in the same
transaction, by a trigger on the event log (``PROGRESS_EVENTS``); an event that names
no session stamps the session holding the issue's unreleased lease. Heartbeats write
no events, so they never stamp it. Existing sessions start from their last heartbeat.

A lease's ``ages_out_at`` is its grant plus its project's ``max_lease_age_seconds``.

SQLite rebuilds the session and project tables (an expression default, a check), which
drops their triggers: as 0014 does, every trigger on them or naming them is set aside
and put back unchanged.
"""

from django.db import migrations, models

import coordination.liveness

REBUILT = ("agent_sessions", "coordination_project")
SET_ASIDE = "projektor_progress_triggers"  # a TEMP table: gone with the connection

# The events that are their session's own change of state.
PROGRESS_EVENTS = (
    "lease.granted",
    "claims.granted",
    "issue.created",
    "issue.transitioned",
    "issue.linked",
    "issue.unlinked",
    "run.dispatched",
    "run.finished",
    "message.posted",
)
# Released by their holder (a reclaim or an override is someone else's doing).
RELEASE_EVENTS = ("lease.released", "claims.released")
TRIGGER = "coordination_event_progress"


def quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{value}'" for value in values)


STAMP = (
    "UPDATE agent_sessions SET last_progress_at = {now} WHERE status = 'active' AND id ="
    " COALESCE(NEW.session_id, (SELECT l.session_id FROM issue_leases l"
    " WHERE l.issue_id = NEW.issue_id AND l.released_at IS NULL))"
)


def create_progress_trigger(apps, schema_editor) -> None:
    released = quoted(RELEASE_EVENTS)
    if schema_editor.connection.vendor == "postgresql":
        when = (
            f"NEW.type IN ({quoted(PROGRESS_EVENTS)}) OR"
            f" (NEW.type IN ({released}) AND NEW.data->>'reason' = 'released')"
        )
        stamp = STAMP.format(now="statement_timestamp()")
        schema_editor.execute(
            f"CREATE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS"
            f" $$ BEGIN {stamp}; RETURN NULL; END $$"
        )
        schema_editor.execute(
            f"CREATE TRIGGER {TRIGGER} AFTER INSERT ON coordination_event FOR EACH ROW"
            f" WHEN ({when}) EXECUTE FUNCTION {TRIGGER}()"
        )
        return
    when = (
        f"NEW.type IN ({quoted(PROGRESS_EVENTS)}) OR"
        f" (NEW.type IN ({released}) AND json_extract(NEW.data, '$.reason') = 'released')"
    )
    now = "(strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')"
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TRIGGER {TRIGGER} AFTER INSERT ON coordination_event FOR EACH ROW"
            f" WHEN {when} BEGIN {STAMP.format(now=now)}; END"
        )


def drop_progress_trigger(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON coordination_event")
        schema_editor.execute(f"DROP FUNCTION IF EXISTS {TRIGGER}()")
    else:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")


def start_from_last_heartbeat(apps, schema_editor) -> None:
    apps.get_model("coordination", "AgentSession").objects.update(
        last_progress_at=models.F("last_heartbeat_at")
    )


def set_triggers_aside(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "sqlite":
        return
    names = " OR ".join(["tbl_name = %s OR instr(sql, %s) > 0"] * len(REBUILT))
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE {SET_ASIDE} AS SELECT name, sql FROM sqlite_master"
            f" WHERE type = 'trigger' AND ({names})",
            [value for table in REBUILT for value in (table, table)],
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
        ("coordination", "0015_work_graph"),
    ]

    operations = [
        migrations.RunPython(set_triggers_aside, put_triggers_back),
        migrations.AddField(
            model_name="agentsession",
            name="last_progress_at",
            field=models.DateTimeField(db_default=coordination.liveness.DbNow(), editable=False),
        ),
        migrations.AddField(
            model_name="agentsession",
            name="progress_note",
            field=models.CharField(blank=True, db_default="", default="", max_length=500),
        ),
        migrations.AddField(
            model_name="agentsession",
            name="stall_announced_for",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="issuelease",
            name="ages_out_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="project",
            name="max_lease_age_seconds",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="event",
            name="type",
            field=models.CharField(
                choices=[
                    ("session.registered", "Session Registered"),
                    ("session.ended", "Session Ended"),
                    ("session.stalled", "Session Stalled"),
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
        migrations.AlterField(
            model_name="fileclaim",
            name="release_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("released", "Released"),
                    ("agent_ended", "Agent Ended"),
                    ("expired", "Expired"),
                    ("overridden", "Overridden"),
                    ("issue_closed", "Issue Closed"),
                    ("worktree_unresolved", "Worktree Unresolved"),
                    ("max_age", "Max Age"),
                ],
                max_length=32,
            ),
        ),
        migrations.AlterField(
            model_name="issuelease",
            name="release_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("released", "Released"),
                    ("agent_ended", "Agent Ended"),
                    ("expired", "Expired"),
                    ("overridden", "Overridden"),
                    ("issue_closed", "Issue Closed"),
                    ("worktree_unresolved", "Worktree Unresolved"),
                    ("max_age", "Max Age"),
                ],
                max_length=32,
            ),
        ),
        migrations.AlterField(
            model_name="worktreelock",
            name="release_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("released", "Released"),
                    ("agent_ended", "Agent Ended"),
                    ("expired", "Expired"),
                    ("overridden", "Overridden"),
                    ("issue_closed", "Issue Closed"),
                    ("worktree_unresolved", "Worktree Unresolved"),
                    ("max_age", "Max Age"),
                ],
                max_length=32,
            ),
        ),
        migrations.AddIndex(
            model_name="agentsession",
            index=models.Index(
                condition=models.Q(("status", "active")),
                fields=["workspace", "last_progress_at"],
                name="session_active_progress_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="project",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("max_lease_age_seconds__isnull", True),
                    ("max_lease_age_seconds__gte", 1),
                    _connector="OR",
                ),
                name="project_max_lease_age_positive",
            ),
        ),
        migrations.RunPython(start_from_last_heartbeat, migrations.RunPython.noop),
        migrations.RunPython(put_triggers_back, set_triggers_aside),
        migrations.RunPython(create_progress_trigger, drop_progress_trigger),
    ]
