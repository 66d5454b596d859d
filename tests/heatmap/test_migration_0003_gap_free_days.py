"""Heatmap migration 0003: rollups kept by 0002 (rows only for days with events) get a
row for every day of each key, counting the same, and the new triggers keep them so
(invariant 14 (rollups)). Run backwards and forwards on the test database."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from coordination.models import ClaimConflict
from heatmap.models import RollupDay
from heatmap.rollups import path_counts

BEFORE = [("heatmap", "0002_rollup_totals")]
AFTER = [("heatmap", "0003_gap_free_days")]
DAY0 = datetime(2026, 10, 1, 12, tzinfo=UTC)


def migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def rows() -> list[tuple]:
    return list(RollupDay.objects.order_by("day").values_list("day", "n", "before"))


@pytest.mark.django_db(transaction=True)
def test_the_days_between_events_are_filled_and_count_the_same(workspace, make_issue):
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    issue = make_issue()
    for days in (0, 3):  # dated at insert: no day moved, so no row made since
        ClaimConflict.objects.create(
            workspace=workspace,
            path="src/a.py",
            rejected_issue=issue,
            holding_issue=issue,
            occurred_at=DAY0 + timedelta(days=days),
        )
    window = {"since": DAY0 - timedelta(days=1), "until": DAY0 + timedelta(days=5)}
    try:
        migrate(BEFORE)
        RollupDay.objects.filter(n=0).delete()  # what 0002's triggers kept
        assert [n for _, n, _ in rows()] == [1, 1]
        migrate(AFTER)
        day = DAY0.date()
        assert rows() == [
            (day + timedelta(days=d), int(d == 0 or d == 3), int(d > 0)) for d in range(4)
        ]
        assert path_counts(workspace, mode="contention", **window) == {"src/a.py": 2}
        ClaimConflict.objects.create(  # and the triggers 0003 installs fill the next gap
            workspace=workspace,
            path="src/a.py",
            rejected_issue=issue,
            holding_issue=issue,
            occurred_at=DAY0 + timedelta(days=6),
        )
        assert [before for _, _, before in rows()] == [0, 1, 1, 1, 2, 2, 2]
    finally:
        migrate(latest)
