"""Hand-made event history for the heatmap: claims and conflicts at known times."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from coordination.models import ClaimConflict, FileClaim, Issue, Workspace

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
WINDOW = {"since": T0, "until": T0 + timedelta(days=1)}


@pytest.fixture
def add_claim() -> Callable[..., FileClaim]:
    """A released claim at ``at`` (released, so one path can be claimed many times)."""

    def add(issue: Issue, path: str, at: datetime = T0, **fields: Any) -> FileClaim:
        claim = FileClaim.objects.create(
            workspace=issue.workspace,
            issue=issue,
            path=path,
            released_at=at + timedelta(minutes=5),
            release_reason="released",
            **fields,
        )
        FileClaim.objects.filter(pk=claim.pk).update(claimed_at=at)  # the column's db default
        return claim

    return add


@pytest.fixture
def add_conflict() -> Callable[..., ClaimConflict]:
    def add(
        rejected: Issue, holding: Issue, path: str, at: datetime = T0, *, forced: bool = False
    ) -> ClaimConflict:
        return ClaimConflict.objects.create(  # dated at insert: the log is append-only
            workspace=rejected.workspace,
            path=path,
            rejected_issue=rejected,
            holding_issue=holding,
            forced=forced,
            occurred_at=at,
        )

    return add


@pytest.fixture
def tree(workspace: Workspace, make_issue, add_claim) -> Issue:
    """Seven claims on one issue, one hour into the window:

    src/api/views.py ×2, src/api/auth.py, src/web/app.tsx, srcs/x.py, README.md,
    docs/a/b/c.md
    """
    issue = make_issue(title="Tree")
    for path in (
        "src/api/views.py",
        "src/api/views.py",
        "src/api/auth.py",
        "src/web/app.tsx",
        "srcs/x.py",
        "README.md",
        "docs/a/b/c.md",
    ):
        add_claim(issue, path, T0 + timedelta(hours=1))
    return issue
