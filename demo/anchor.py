"""Re-anchoring the demo's history to now, so the pages' default windows are never empty.

The demo is seeded once. A week later its month of history would have slid out of
the 7-day windows of the heatmap and the health page. So when the workspace's newest
event is older than ``STALE_AFTER``, ``reanchor`` moves every timestamp of the demo
forward by the same delta, ``now - the newest stamp``: the story keeps its shape
(relative spacing, order, who was live when) and ends now. It runs in one
transaction, and only when the history is stale: run twice, it moves nothing the
second time.

The stamps moved are the simulation's own (``clock.STAMPS``) and the workspace's
``created_at``; API keys, logins and webhook deliveries are real operations and keep
their times. The contention logs are append-only; moving them is one of the edits
their door allows (``services.logs``), as it is for the clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connection, models, transaction
from django.db.models import F, Max, TextField, Value
from django.db.models.functions import Cast, Concat, Length

from coordination.liveness import DbNow
from coordination.models import Event, Workspace
from coordination.services import logs
from demo.clock import STAMPS

STALE_AFTER = timedelta(days=1)

# SQLite keeps datetimes as text, ``YYYY-MM-DD HH:MM:SS.ffffff``. Django's
# ``F(col) + delta`` there writes ``str(datetime)``, which drops a zero fraction: the
# 19-character form is a second text format (clock.offset_between says why that
# matters), restored below.
SQLITE_WHOLE_SECOND = 19


def columns() -> list[tuple[type[models.Model], tuple[str, ...]]]:
    """Every moved model with its stamp columns (inserted and rewritten alike)."""
    moved: list[tuple[type[models.Model], tuple[str, ...]]] = [
        (stamps.model, stamps.inserted + stamps.rewritten) for stamps in STAMPS
    ]
    return [*moved, (Workspace, ("created_at",))]


def rows_of(model: type[models.Model], workspace: Workspace) -> models.QuerySet[models.Model]:
    if model is Workspace:
        return Workspace.objects.filter(pk=workspace.pk)
    return model._default_manager.filter(workspace=workspace)


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


def newest_stamp(workspace: Workspace) -> datetime | None:
    """The latest of every moved stamp: a heartbeat writes no event, so the newest
    stamp can be later than the newest event, and it must not land in the future."""
    latest = [
        value
        for model, cols in columns()
        for value in rows_of(model, workspace).aggregate(**{col: Max(col) for col in cols}).values()
        if value is not None
    ]
    return max(latest, default=None)


def reanchor(workspace: Workspace) -> timedelta | None:
    """Move the history forward so it ends now, if its newest event is older than
    ``STALE_AFTER`` (by the database's clock); the delta moved, or ``None``."""
    with transaction.atomic():
        newest = newest_event(workspace)
        now = db_now(workspace)
        if newest is None or now - newest <= STALE_AFTER:
            return None
        latest = newest_stamp(workspace)
        assert latest is not None  # there is an event
        delta = now - latest
        shift(workspace, delta)
        return delta


def shift(workspace: Workspace, delta: timedelta) -> None:
    """Add ``delta`` (negative: into the past) to every moved stamp of the workspace,
    in one transaction."""
    with logs.unlocked(workspace.pk):
        for model, cols in columns():
            rows_of(model, workspace).update(**{col: F(col) + delta for col in cols})
            if connection.vendor == "sqlite":
                for col in cols:
                    keep_fraction(rows_of(model, workspace), col)


def keep_fraction(rows: models.QuerySet[models.Model], col: str) -> None:
    """Give a stamp that lost its zero fraction its ``.000000`` back (SQLite only)."""
    text = Cast(col, output_field=TextField())
    rows.alias(length=Length(text)).filter(length=SQLITE_WHOLE_SECOND).update(
        **{col: Concat(text, Value(".000000"), output_field=TextField())}
    )
