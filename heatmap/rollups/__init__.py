"""Events per path in a window, read from the daily rollups and the window's edges
(invariant 14 (rollups)).

A window ``[since, until)`` is read as the UTC days ``[first, end)`` from the first
midnight at or after ``since`` to the first at or after ``until``, plus the events of
``[since, first)`` and less those of ``[until, end)``, both from the event rows (at
most a day's worth each, and for a window ending now the second is empty). The days
come from the rollups (``heatmap.models``): for every key that can have events in
them (``last_day >= first`` and ``first_day < end``), ``C(end) - C(first)``, where a
key has a row for every day from its first to its last and ``C(day)`` is that row's
``before``. Ending at the first midnight after ``until`` is what makes ``C(end)``
free for a window ending now: ``end`` is after every key's last day, so it is the
key's ``total``. And ``C(first)`` is ``0`` for a key whose first day is in the
window; for the others it is their row of ``first``. All keys' rows of one day are
one range of the (day, key) index, joined to the keys by hash: the cost is one index
entry per path counted, read in one pass, not one per event, and a 90-day window
costs what a 7-day one does. All of it is one ``UNION ALL`` query.
"""

from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db.models import (
    BigIntegerField,
    Case,
    Count,
    F,
    FilteredRelation,
    Q,
    QuerySet,
    Value,
    When,
)

from coordination.models import Project, Workspace
from coordination.paths import under_prefix
from heatmap import raw
from heatmap.models import RollupKey


def midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def next_midnight(moment: datetime) -> date | None:
    """The first UTC day that starts at or after ``moment`` (None after the last one)."""
    day = moment.astimezone(UTC).date()
    if moment == midnight(day):
        return day
    return day + timedelta(days=1) if day < date.max else None


Span = tuple[datetime, datetime, int]  # rows in [start, stop), counted +1 or -1 times


def days_of(since: datetime, until: datetime) -> tuple[tuple[date, date] | None, list[Span]]:
    """``(first, end)`` to read from the rollups (None: no whole day to read), and
    the row spans that make it ``[since, until)``."""
    first = next_midnight(since)
    end = next_midnight(until) or until.astimezone(UTC).date()  # on the last day there is
    if first is None or first >= end:
        return None, [(since, until, 1)]
    spans = [(since, midnight(first), 1)]
    if until < midnight(end):
        spans.append((until, midnight(end), -1))
    else:
        spans.append((midnight(end), until, 1))
    return (first, end), [span for span in spans if span[0] < span[1]]


def whole_days(since: datetime, until: datetime) -> tuple[date, date] | None:
    """``(first, end)``: the UTC days wholly inside ``[since, until)`` (None: none)."""
    first = next_midnight(since)
    end = until.astimezone(UTC).date()
    return (first, end) if first is not None and first < end else None


def outside_days(column: str, since: datetime, until: datetime, days: tuple[date, date]) -> Q:
    """The part days of ``[since, until)`` at either side of its whole ``days``."""
    first, end = days
    return Q(**{f"{column}__gte": since, f"{column}__lt": midnight(first)}) | Q(
        **{f"{column}__gte": midnight(end), f"{column}__lt": until}
    )


def rolled_up(
    workspace: Workspace,
    *,
    mode: raw.Mode,
    first: date,
    end: date,
    project: Project | None,
    prefix: str,
) -> QuerySet[Any]:
    """``(path, count)`` per key over the days ``[first, end)``, from at most its rows
    of ``first`` and of ``end``: each read by the day's own index range, not probed."""
    keys = RollupKey.objects.filter(
        workspace=workspace, mode=mode, last_day__gte=first, first_day__lt=end
    )
    if project is not None:
        keys = keys.filter(project=project)
    if prefix:
        keys = under_prefix(keys, "path", prefix)
    return (
        keys.annotate(
            at_first=FilteredRelation("days", condition=Q(days__day=first)),
            at_end=FilteredRelation("days", condition=Q(days__day=end)),
        )
        .annotate(
            # A key whose last day is before ``end``: all its events are before it.
            count=Case(When(last_day__lt=end, then=F("total")), default=F("at_end__before"))
            # A key whose first day is in the window had nothing before it.
            - Case(
                When(first_day__gte=first, then=Value(0, BigIntegerField())),
                default=F("at_first__before"),
            ),
        )
        .values_list("path", "count")
    )


def path_counts(
    workspace: Workspace,
    *,
    mode: raw.Mode,
    since: datetime,
    until: datetime,
    project: Project | None = None,
    prefix: str = "",
) -> dict[str, int]:
    """Events per path in ``[since, until)`` under ``prefix``; paths with none are left out."""
    days, spans = days_of(since, until)
    # Each span of rows a range of its own: one index range scan each.
    parts: list[QuerySet[Any]] = [
        raw.events(workspace, mode=mode, since=start, until=stop, project=project, prefix=prefix)
        .values_list("path")
        .annotate(count=Count("*") * sign)
        .order_by()
        for start, stop, sign in spans
    ]
    if days is not None:
        first, end = days
        parts.append(
            rolled_up(workspace, mode=mode, first=first, end=end, project=project, prefix=prefix)
        )
    counted = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    totals: dict[str, int] = defaultdict(int)
    for path, count in counted:
        totals[path] += count
    return {path: count for path, count in totals.items() if count > 0}
