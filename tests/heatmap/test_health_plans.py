"""The health page's per-day series read a range of an index on (workspace, time):
their cost is the window's rows, never the workspace's history; and they count by
UTC day (both databases)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from coordination.models import ClaimConflict, FileClaim, IssueLease, WipCapDenial
from heatmap.health import conflicts_per_day, counted_per_day, kept_per_day
from heatmap.models import DayCount, DayCountSeries

pytestmark = pytest.mark.django_db

SERIES = [
    (ClaimConflict, "occurred_at", "forced"),
    (WipCapDenial, "occurred_at", "workspace_id"),
    (IssueLease, "released_at", "release_reason"),
    (FileClaim, "released_at", "release_reason"),
]


def plan_of(rows) -> str:
    """The plan as text (PostgreSQL kept off sequential scans: a test table is too
    small to need an index)."""
    sql, params = rows.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute(f"EXPLAIN {sql}", params)
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row) for row in cursor.fetchall())


def a_year_of_conflicts(issue, now) -> None:
    """Enough history that the window is the selective part of the conflicts' filter
    (their other index, on the path, ties with it on an empty table)."""
    ClaimConflict.objects.bulk_create(
        ClaimConflict(
            workspace=issue.workspace,
            path=f"src/m{hour % 20}.py",
            rejected_issue=issue,
            holding_issue=issue,
            occurred_at=now - timedelta(hours=hour),
        )
        for hour in range(0, 365 * 24, 6)
    )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {ClaimConflict._meta.db_table}")


@pytest.mark.parametrize(("model", "time_field", "kind_field"), SERIES)
def test_a_series_reads_its_window_off_the_index(
    workspace, make_issue, model, time_field, kind_field
):
    (index,) = [i for i in model._meta.indexes if i.fields[:2] == ["workspace", time_field]]
    until = timezone.now()
    a_year_of_conflicts(make_issue(), until)
    rows = counted_per_day(
        model.objects.filter(workspace=workspace),
        time_field=time_field,
        kind_field=kind_field,
        since=until - timedelta(days=7),
        until=until,
    )
    plan = plan_of(rows)
    assert index.name in plan, plan


def test_a_series_counts_by_utc_day_either_side_of_midnight(workspace, make_issue, add_conflict):
    issue = make_issue()
    midnight = datetime(2026, 11, 2, tzinfo=UTC)
    add_conflict(issue, issue, "src/a.py", midnight - timedelta(microseconds=1))
    add_conflict(issue, issue, "src/a.py", midnight, forced=True)
    add_conflict(issue, issue, "src/a.py", midnight + timedelta(hours=23, minutes=59))
    day = timedelta(days=1)
    series = conflicts_per_day(workspace, midnight - day, midnight + day)
    assert series.days == [(midnight - day).date(), midnight.date()]
    assert series.series == {"rejected": [1, 1], "forced": [0, 1]}


def test_the_whole_days_read_a_range_of_the_day_counts(workspace, make_issue):
    (index,) = [i for i in DayCount._meta.indexes if i.name == "day_counts_by_day"]
    until = timezone.now()
    a_year_of_conflicts(make_issue(), until)
    rows = kept_per_day(
        workspace,
        DayCountSeries.CONFLICTS,
        first=(until - timedelta(days=7)).date(),
        end=until.date(),
    )
    assert sum(n for _, _, n in rows) == 7 * 4  # a conflict every six hours
    plan = plan_of(rows)
    assert index.name in plan, plan
