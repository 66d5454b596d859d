"""Heatmap migration 0004: the releases and conflicts made before it are counted into
the day counts, and its triggers count the ones after (invariant 15 (day counts)). Run backwards
and forwards on the test database."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from coordination.models import FileClaim

BEFORE = [("heatmap", "0003_gap_free_days")]
AFTER = [("heatmap", "0004_day_counts")]
DAY = datetime(2026, 10, 1, 12, tzinfo=UTC)


def migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


@pytest.mark.django_db(transaction=True)
def test_the_releases_so_far_are_counted(workspace, make_issue):
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    issue = make_issue()
    try:
        migrate(BEFORE)  # no day counts, no triggers of theirs
        for path in ("a.py", "b.py"):
            FileClaim.objects.create(
                workspace=workspace,
                issue=issue,
                path=path,
                released_at=DAY,
                release_reason="expired",
            )
        executor = migrate(AFTER)
        counts = executor.loader.project_state(AFTER).apps.get_model("heatmap", "DayCount")
        releases = counts.objects.filter(workspace_id=workspace.pk, series="claim_releases")
        assert list(releases.values_list("kind", "day", "n")) == [("expired", DAY.date(), 2)]
        FileClaim.objects.filter(path="a.py").update(release_reason="released")
        assert sorted(releases.values_list("kind", "n")) == [("expired", 1), ("released", 1)]
    finally:
        migrate(latest)
