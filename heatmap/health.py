"""Factory health: who is alive, how full each project is, and what went wrong per day.

Read-only queries for the health page. Every count is made by the database
(``GROUP BY`` day and kind); liveness is the one predicate of ``coordination.liveness``.
The project loads and the runs that did not start are coordination's selectors, which
the admin dashboard shows too.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate

from coordination.liveness import live_q, stalled_q
from coordination.models import (
    AgentSession,
    ClaimConflict,
    FileClaim,
    IssueLease,
    ReleaseReason,
    Run,
    WipCapDenial,
    Workspace,
)
from coordination.selectors.dashboard import TROUBLED_RUN_STATUSES
from coordination.selectors.sessions import live_sessions
from heatmap.models import DayCount, DayCountSeries
from heatmap.rollups import outside_days, whole_days


def live_agents(workspace: Workspace) -> QuerySet[AgentSession]:
    """Live sessions now, with what each holds."""
    return live_sessions(workspace).annotate(
        leases_held=Count("leases", filter=Q(leases__released_at__isnull=True), distinct=True),
        claims_held=Count(
            "file_claims", filter=Q(file_claims__released_at__isnull=True), distinct=True
        ),
    )


STALLED_SHOWN = 50


@dataclass(frozen=True)
class StalledAgents:
    """Stalled sessions now (invariant 17 (stalled is derived)), longest stalled first (at most
    ``STALLED_SHOWN`` of them, ``count`` in all), each with ``held``: the issues it
    leases."""

    count: int
    sessions: list[AgentSession]


def stalled_agents(workspace: Workspace) -> StalledAgents:
    """Three statements however many: the count, the page, and what the page holds."""
    stalled = live_sessions(workspace).filter(stalled_q())
    shown = list(stalled.order_by("last_progress_at", "id")[:STALLED_SHOWN])
    held: dict[int, list[Any]] = defaultdict(list)
    if shown:
        leases = (
            IssueLease.objects.filter(session__in=shown, released_at__isnull=True)
            .select_related("issue")
            .order_by("issue_id")
        )
        for lease in leases:
            held[lease.session_id].append(lease.issue)
    for session in shown:
        session.held = held[session.pk]  # type: ignore[attr-defined]
    count = len(shown) if len(shown) < STALLED_SHOWN else stalled.count()
    return StalledAgents(count=count, sessions=shown)


def stall_after_words() -> str:
    """``PROJEKTOR_STALL_AFTER_SECONDS`` as the page says it."""
    seconds = int(settings.PROJEKTOR_STALL_AFTER_SECONDS)
    if seconds % 60:
        return f"{seconds} seconds"
    return f"{seconds // 60} minute{'s' if seconds != 60 else ''}"


@dataclass(frozen=True)
class DailySeries:
    """Per-day counts, one list per named series, aligned with ``days``."""

    days: list[date]
    series: dict[str, list[int]]

    @property
    def total(self) -> int:
        return sum(sum(values) for values in self.series.values())


def days_of(since: datetime, until: datetime) -> list[date]:
    """Every UTC day the window ``[since, until)`` touches."""
    last = (until - timedelta(microseconds=1)).date()
    count = (last - since.date()).days + 1
    return [since.date() + timedelta(days=offset) for offset in range(max(count, 0))]


class UtcDate(TruncDate):
    """The UTC day of a time. On SQLite by its own ``date()`` (a stored time is UTC
    text) rather than Django's per-row Python function, which cost seconds over a
    90-day window of a long history."""

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        sql, params = compiler.compile(self.lhs)
        return f"date({sql})", params


def counted_per_day(
    rows: QuerySet[Any],
    *,
    time_field: str,
    kind_field: str,
    since: datetime,
    until: datetime,
    within: Q | None = None,
) -> QuerySet[Any]:
    """``(day, kind, n)`` of ``rows`` in the window (or in the ranges of ``within``,
    inside it): a range of the index that starts with the workspace and ``time_field``
    (each table has one), not its history."""
    if within is None:
        within = Q(**{f"{time_field}__gte": since, f"{time_field}__lt": until})
    return (
        rows.filter(within)
        .annotate(day=UtcDate(time_field, tzinfo=UTC))
        .values_list("day", kind_field)
        .annotate(n=Count("*"))
        .order_by()
    )


def per_day(
    rows: QuerySet[Any],
    *,
    time_field: str,
    kind_field: str,
    kinds: dict[Any, str],
    since: datetime,
    until: datetime,
    counted: dict[tuple[date, str], int] | None = None,
    within: Q | None = None,
) -> DailySeries:
    """Count ``rows`` per UTC day and ``kind_field`` value; ``kinds`` maps a value to
    its series name (and fixes the series order). Values not in ``kinds`` are left out.
    ``counted`` holds counts per day and series name made elsewhere, and then only
    the rows of ``within`` (ranges inside the window) are counted."""
    counts: dict[tuple[date, str], int] = defaultdict(int, counted or {})
    grouped = counted_per_day(
        rows,
        time_field=time_field,
        kind_field=kind_field,
        since=since,
        until=until,
        within=within,
    )
    for day, kind, n in grouped:
        if kind in kinds:
            counts[(day, kinds[kind])] += n
    days = days_of(since, until)
    return DailySeries(
        days=days,
        series={name: [counts[(day, name)] for day in days] for name in kinds.values()},
    )


def kept_per_day(
    workspace: Workspace, series: DayCountSeries, *, first: date, end: date
) -> QuerySet[Any]:
    """``(day, kind, n)`` of the days ``[first, end)`` of a kept series: a range of
    the day counts' index, a few rows a day."""
    return (
        DayCount.objects.filter(workspace=workspace, series=series, day__gte=first, day__lt=end)
        .values_list("day", "kind")
        .annotate(n=Sum("n"))
        .order_by()
    )


def workspace_per_day(
    workspace: Workspace,
    series: DayCountSeries,
    rows: QuerySet[Any],
    *,
    time_field: str,
    kind_field: str,
    kinds: dict[Any, str],
    kept: dict[str, str],
    since: datetime,
    until: datetime,
) -> DailySeries:
    """``per_day`` of one of the workspace's kept series (invariant 15 (day counts)): its whole UTC
    days from the day counts (``kept`` maps their kinds to the series names), a range
    of their index however many events they hold, and only the part days at the
    window's ends from ``rows`` (at most a day each)."""
    days = whole_days(since, until)
    counted, within = {}, None
    if days is not None:
        first, end = days
        whole = kept_per_day(workspace, series, first=first, end=end)
        counted = {(day, kept[kind]): n for day, kind, n in whole if kind in kept}
        # Two ranges of the rows' index, each at most a day: not the window's rows.
        within = outside_days(time_field, since, until, days)
    return per_day(
        rows,
        time_field=time_field,
        kind_field=kind_field,
        kinds=kinds,
        since=since,
        until=until,
        counted=counted,
        within=within,
    )


def conflicts_per_day(workspace: Workspace, since: datetime, until: datetime) -> DailySeries:
    return workspace_per_day(
        workspace,
        DayCountSeries.CONFLICTS,
        ClaimConflict.objects.filter(workspace=workspace),
        time_field="occurred_at",
        kind_field="forced",
        kinds={False: "rejected", True: "forced"},
        kept={"rejected": "rejected", "forced": "forced"},
        since=since,
        until=until,
    )


def wip_denials_per_day(workspace: Workspace, since: datetime, until: datetime) -> DailySeries:
    return workspace_per_day(
        workspace,
        DayCountSeries.WIP_DENIALS,
        WipCapDenial.objects.filter(workspace=workspace),
        time_field="occurred_at",
        kind_field="workspace_id",
        kinds={workspace.pk: "WIP-cap denials"},
        kept={"": "WIP-cap denials"},
        since=since,
        until=until,
    )


# Crashes first and clean exits second: that split is the fleet-mortality signal.
FIRST_REASONS = (ReleaseReason.EXPIRED, ReleaseReason.AGENT_ENDED)
RELEASE_SERIES = {
    reason.value: reason.value
    for reason in (*FIRST_REASONS, *(r for r in ReleaseReason if r not in FIRST_REASONS))
}


def releases_per_day(
    model: type[IssueLease] | type[FileClaim],
    workspace: Workspace,
    since: datetime,
    until: datetime,
) -> DailySeries:
    """Lease or file-claim releases per day, one series per reason."""
    return workspace_per_day(
        workspace,
        DayCountSeries.LEASE_RELEASES if model is IssueLease else DayCountSeries.CLAIM_RELEASES,
        model.objects.filter(workspace=workspace),
        time_field="released_at",
        kind_field="release_reason",
        kinds=RELEASE_SERIES,
        kept=RELEASE_SERIES,
        since=since,
        until=until,
    )


@dataclass(frozen=True)
class SessionOutcomes:
    started: int
    ended: int  # clean exits
    died: int  # stopped heartbeating without ending
    live: int


def session_outcomes(workspace: Workspace, since: datetime, until: datetime) -> SessionOutcomes:
    """What became of the sessions started in the window."""
    started = AgentSession.objects.filter(
        workspace=workspace, started_at__gte=since, started_at__lt=until
    )
    counts = started.aggregate(
        started=Count("*"),
        ended=Count("pk", filter=Q(status=AgentSession.Status.ENDED)),
        live=Count("pk", filter=live_q()),
    )
    return SessionOutcomes(
        started=counts["started"],
        ended=counts["ended"],
        died=counts["started"] - counts["ended"] - counts["live"],
        live=counts["live"],
    )


def troubled_run_counts(workspace: Workspace, since: datetime, until: datetime) -> dict[str, int]:
    rows = (
        Run.objects.filter(
            workspace=workspace,
            status__in=TROUBLED_RUN_STATUSES,
            started_at__gte=since,
            started_at__lt=until,
        )
        .values_list("status")
        .annotate(n=Count("*"))
        .order_by()
    )
    return {str(status): 0 for status in TROUBLED_RUN_STATUSES} | dict(rows)
