"""A database that holds a history from before the heatmap's first triggers, upgraded
through every heatmap migration with more history written at each, counts what a
recount from the rows counts (invariants 14 (rollups) and 15 (day counts)), on SQLite and
PostgreSQL.

Each migration runs its own frozen SQL, so this is the path an old database takes,
not the code of today installed at the first step.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Sum

from coordination.models import ClaimConflict, FileClaim, Issue, IssueLease, WipCapDenial
from heatmap.models import DayCount, RollupDay, RollupKey
from heatmap.rollups import path_counts
from heatmap.rollups.recount import recount

STEPS = ["0001_rollups", "0002_rollup_totals", "0003_gap_free_days", "0004_day_counts"]
DAY0 = datetime(2026, 10, 1, 12, tzinfo=UTC)
PATHS = ("src/api/views.py", "src/api/", "docs/a.md")
KEY = ("workspace_id", "project_id", "mode", "path")


def migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def claim(issue: Issue, path: str, at: datetime) -> FileClaim:
    """A claim released five minutes after ``at``, each written as the services do."""
    made = FileClaim.objects.create(
        workspace=issue.workspace,
        issue=issue,
        path=path,
        released_at=at + timedelta(minutes=5),
        release_reason="released",
    )
    FileClaim.objects.filter(pk=made.pk).update(claimed_at=at)  # the column's db default
    return made


def write_history(step: int, issues: list[Issue]) -> None:
    """Claims, conflicts, WIP denials and lease releases over a week after ``step``
    days, some on days the keys already have, some before and after them; a claim
    moved to another path and day, and one deleted."""
    start = DAY0 + timedelta(days=3 * step)
    first, second, stranger = issues
    for offset, path in enumerate(PATHS * 2):
        at = start + timedelta(days=offset % 4, hours=offset)
        claim(first if offset % 2 else second, path, at)
        ClaimConflict.objects.create(
            workspace=first.workspace,
            path=path,
            rejected_issue=first,
            holding_issue=second if offset % 3 else first,
            forced=offset == 2,
            occurred_at=at - timedelta(days=5),  # before the keys' first days
        )
    ClaimConflict.objects.bulk_create(  # one statement of several keys on one day
        ClaimConflict(
            workspace=first.workspace,
            path=path,
            rejected_issue=second,
            holding_issue=first,
            occurred_at=start + timedelta(hours=2),
        )
        for path in PATHS
    )
    claim(stranger, PATHS[0], start)
    moved = claim(first, "src/old.py", start + timedelta(days=1))
    FileClaim.objects.filter(pk=moved.pk).update(
        path="src/new.py", claimed_at=start + timedelta(days=6)
    )
    claim(second, "src/gone.py", start + timedelta(days=2)).delete()
    WipCapDenial.objects.create(
        workspace=first.workspace,
        project=first.project,
        issue=first,
        limit=2,
        occurred_at=start + timedelta(hours=3),
    )
    IssueLease.objects.create(
        workspace=first.workspace,
        issue=first,
        released_at=start + timedelta(days=1),
        release_reason="expired",
        fence=step + 1,  # one lease of the issue after another
    )


def rollup_days() -> set[tuple]:
    return set(
        RollupDay.objects.values_list(
            "key__workspace_id", "key__project_id", "key__mode", "key__path", "day", "n", "before"
        )
    )


def key_totals() -> dict[tuple, int]:
    keys = RollupKey.objects.filter(total__gt=0)
    return {key[:4]: key[4] for key in keys.values_list(*KEY, "total")}


def day_counts() -> dict[tuple, int]:
    """Each workspace's count of a series, kind and day (PostgreSQL's writers may
    spread one over several rows)."""
    counts = DayCount.objects.values_list("workspace_id", "series", "kind", "day")
    return {row[:4]: row[4] for row in counts.annotate(total=Sum("n")).order_by() if row[4] != 0}


@pytest.mark.django_db(transaction=True)
def test_an_old_history_upgraded_counts_what_a_recount_counts(
    workspace, other_workspace, make_issue
):
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    stranger_project = other_workspace.projects.create(key="OTH", name="Other")
    issues = [
        make_issue(),
        make_issue(),
        Issue.objects.create(workspace=other_workspace, project=stranger_project, title="S"),
    ]
    try:
        for step, name in enumerate(STEPS):
            migrate([("heatmap", name)])
            write_history(step, issues)
        migrate(latest)
        write_history(len(STEPS), issues)

        kept = (rollup_days(), key_totals(), day_counts())
        window = {"since": DAY0 - timedelta(days=10), "until": DAY0 + timedelta(days=30)}
        shown = {
            mode: path_counts(workspace, mode=mode, **window) for mode in ("claims", "contention")
        }
        recount()
        days, totals, counts = rollup_days(), key_totals(), day_counts()

        assert days <= kept[0], "a day the triggers kept differs from the recount's"
        assert all(row[5] == 0 for row in kept[0] - days)  # removed events leave their days
        assert kept[1:] == (totals, counts)
        assert {
            mode: path_counts(workspace, mode=mode, **window) for mode in ("claims", "contention")
        } == shown
        assert shown["claims"]["src/new.py"] == len(STEPS) + 1
        assert "src/gone.py" not in shown["claims"]
        assert {series for _, series, _, _ in counts} == {
            "conflicts",
            "wip_denials",
            "lease_releases",
            "claim_releases",
            "issue_claims",
            "issue_rejected",
            "issue_held",
        }
    finally:
        migrate(latest)
