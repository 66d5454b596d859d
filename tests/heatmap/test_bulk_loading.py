"""A bulk load (``coordination.services.bulk``) is counted once after, exactly as the
triggers would have counted it row by row (invariants 14 (rollups) and 15 (day counts); SQLite and
PostgreSQL), and a failed one changes nothing."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Sum

from coordination.models import FileClaim, Issue, Workspace
from coordination.services import bulk
from heatmap.models import DayCount
from heatmap.rollups import path_counts
from tests.heatmap.test_rollups import assert_consistent

pytestmark = pytest.mark.django_db

DAY0 = datetime(2026, 10, 1, 9, tzinfo=UTC)
WINDOW = {"since": DAY0 - timedelta(days=1), "until": DAY0 + timedelta(days=30)}


def released_claims(issue: Issue, *days_and_paths: tuple[int, str]) -> list[FileClaim]:
    """One statement of released claims, as a bulk load writes them."""
    return FileClaim.objects.bulk_create(
        FileClaim(
            workspace=issue.workspace,
            issue=issue,
            path=path,
            claimed_at=DAY0 + timedelta(days=days),
            released_at=DAY0 + timedelta(days=days, minutes=5),
            release_reason="expired",
        )
        for days, path in days_and_paths
    )


def claim_releases(workspace: Workspace) -> int:
    counts = DayCount.objects.filter(workspace=workspace, series="claim_releases")
    return counts.aggregate(n=Sum("n"))["n"] or 0


def test_a_bulk_load_is_counted_once_after_it(workspace, make_issue):
    issue = make_issue()
    released_claims(issue, (0, "src/a.py"))  # history from before, through the triggers
    with bulk.loading(workspace.pk):
        released_claims(issue, (2, "src/a.py"), (9, "src/a.py"), (4, "src/b.py"), (20, "c.py"))
        # Not row by row: nothing of the load is counted until it is all written.
        assert path_counts(workspace, mode="claims", **WINDOW) == {"src/a.py": 1}
    assert path_counts(workspace, mode="claims", **WINDOW) == {
        "src/a.py": 3,
        "src/b.py": 1,
        "c.py": 1,
    }
    assert claim_releases(workspace) == 5
    assert_consistent(workspace)  # every day of every path, as the triggers keep them
    released_claims(issue, (25, "c.py"))  # and the triggers count again after it
    assert path_counts(workspace, mode="claims", **WINDOW)["c.py"] == 2
    assert claim_releases(workspace) == 6


def test_a_failed_bulk_load_changes_nothing(workspace, make_issue):
    issue = make_issue()
    released_claims(issue, (0, "src/a.py"))
    with pytest.raises(RuntimeError), bulk.loading(workspace.pk):
        released_claims(issue, (3, "src/a.py"), (5, "src/b.py"))
        raise RuntimeError("the load stops half way")
    assert FileClaim.objects.filter(workspace=workspace).count() == 1
    assert path_counts(workspace, mode="claims", **WINDOW) == {"src/a.py": 1}
    released_claims(issue, (6, "src/b.py"))  # the triggers are still there
    assert path_counts(workspace, mode="claims", **WINDOW) == {"src/a.py": 1, "src/b.py": 1}
    assert claim_releases(workspace) == 2
    assert_consistent(workspace)
