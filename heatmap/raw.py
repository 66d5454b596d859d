"""The heatmap's events as rows: file claims by ``claimed_at`` (*claims* mode) and
``claim_conflicts`` rows by ``occurred_at`` (*contention* mode), in ``since <= t <
until``, under a prefix by whole segments (``a`` holds ``a/x``, not ``ab/x``).

The heatmap reads whole days from the rollups (``heatmap.rollups``) and only the
partial days at a window's ends from here; the pages' stories and pairs read here.
"""

from datetime import datetime
from typing import Any, Literal

from django.db.models import QuerySet

from coordination.models import ClaimConflict, FileClaim, Project, Workspace
from coordination.paths import under_prefix

Mode = Literal["claims", "contention"]


def events(
    workspace: Workspace,
    *,
    mode: Mode,
    since: datetime,
    until: datetime,
    project: Project | None = None,
    prefix: str = "",
) -> QuerySet[Any]:
    """The events of ``mode`` in the window, under ``prefix`` (already normalised)."""
    rows: QuerySet[Any]
    if mode == "claims":
        rows = FileClaim.objects.filter(
            workspace=workspace, claimed_at__gte=since, claimed_at__lt=until
        )
        if project is not None:
            rows = rows.filter(issue__project=project)
    else:
        rows = ClaimConflict.objects.filter(
            workspace=workspace, occurred_at__gte=since, occurred_at__lt=until
        )
        if project is not None:
            rows = rows.filter(rejected_issue__project=project)
    if prefix:  # whole segments: the prefix itself, or anything under "<prefix>/"
        rows = under_prefix(rows, "path", prefix)
    return rows
