"""Events per path in a window, read from the daily rollups and the window's edges
(invariant 14).

A window ``[since, until)`` splits into whole UTC days ``[first, end)`` and at most
two partial days around them. The whole days come from the rollups
(``heatmap.models``): for every key that can have events in them (``last_day >=
first`` and ``first_day < end``), ``C(end) - C(start)`` by two index probes, so
their cost is one per path counted, not one per event, and a 90-day window costs
what a 7-day one does. The partial days are counted from the event rows (at most two
days' worth). Both halves are one ``UNION ALL`` query.
"""

from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db.models import (
    Case,
    Count,
    F,
    IntegerField,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from coordination.filtersets import under_prefix
from coordination.models import Project, Workspace
from heatmap import raw
from heatmap.models import RollupDay, RollupKey


def midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def whole_days(since: datetime, until: datetime) -> tuple[date, date] | None:
    """``(first, end)``: the UTC days wholly inside ``[since, until)``, or None."""
    start = since.astimezone(UTC)
    if start == midnight(start.date()):
        first = start.date()
    elif start.date() < date.max:
        first = start.date() + timedelta(days=1)
    else:  # the last day there is: no whole day after it
        return None
    end = until.astimezone(UTC).date()
    return (first, end) if first < end else None


def events_before(day: date) -> Subquery:
    """``C(day)`` of the outer key: its events on the days before ``day``."""
    last_row = (
        RollupDay.objects.filter(key=OuterRef("pk"), day__lt=day)
        .order_by("-day")
        .annotate(upto=F("before") + F("n"))
        .values("upto")[:1]
    )
    return Subquery(last_row, output_field=IntegerField())


def rolled_up(
    workspace: Workspace,
    *,
    mode: raw.Mode,
    first: date,
    end: date,
    project: Project | None,
    prefix: str,
) -> QuerySet[Any]:
    """``(path, count)`` per key over the days ``[first, end)``."""
    keys = RollupKey.objects.filter(
        workspace=workspace, mode=mode, last_day__gte=first, first_day__lt=end
    )
    if project is not None:
        keys = keys.filter(project=project)
    if prefix:
        keys = under_prefix(keys, "path", prefix)
    return keys.annotate(
        count=Coalesce(events_before(end), 0)
        # A key whose first day is in the window had nothing before it: no probe.
        - Case(
            When(first_day__gte=first, then=Value(0)),
            default=Coalesce(events_before(first), 0),
        )
    ).values_list("path", "count")


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
    days = whole_days(since, until)
    # The partial days, each a range of its own: one index range scan each.
    spans = [(since, until)]
    if days is not None:
        spans = [(since, midnight(days[0])), (midnight(days[1]), until)]
    parts: list[QuerySet[Any]] = [
        raw.events(workspace, mode=mode, since=start, until=stop, project=project, prefix=prefix)
        .values_list("path")
        .annotate(count=Count("*"))
        .order_by()
        for start, stop in spans
        if start < stop
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
