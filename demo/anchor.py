"""A stale demo history is seeded again, so the pages' default windows are never empty.

The demo is seeded once. A week later its month of history would have slid out of
the 7-day windows of the heatmap and the health page. So when the workspace's newest
event is older than ``STALE_AFTER``, ``seed_demo`` deletes the demo workspace and
seeds it again, ending now (the same seed tells the same story). The history is not
moved forward in place: its contention logs are append-only (invariant 8 (append-only
logs)), and deleting a workspace is the one thing their door is for.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Max

from coordination.liveness import DbNow
from coordination.models import Event, Workspace

STALE_AFTER = timedelta(days=1)


def db_now(workspace: Workspace) -> datetime:
    now: datetime = (
        Workspace.objects.filter(pk=workspace.pk)
        .annotate(db_now=DbNow())
        .values_list("db_now", flat=True)
        .get()
    )
    return now


def newest_event(workspace: Workspace) -> datetime | None:
    newest: datetime | None = Event.objects.filter(workspace=workspace).aggregate(
        newest=Max("occurred_at")
    )["newest"]
    return newest


def staleness(workspace: Workspace) -> timedelta | None:
    """How old the history is (the database's now minus its newest event) when that is
    more than ``STALE_AFTER``; ``None`` for a history fresh enough to keep."""
    newest = newest_event(workspace)
    if newest is None:
        return None
    age = db_now(workspace) - newest
    return age if age > STALE_AFTER else None
