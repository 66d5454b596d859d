"""The health page's day counts against the rows they count (invariant 15 (day counts); SQLite and
PostgreSQL).

Any history of conflicts, WIP-cap denials, leases and file claims, written in any
order, released, re-dated, given another reason and deleted, gives the same series
from the day counts as from the rows, in any window; and ``recount`` builds counts
with the same sums. The rows are the oracle.
"""

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Sum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordination.models import (
    ClaimConflict,
    FileClaim,
    Issue,
    IssueLease,
    Project,
    WipCapDenial,
    Workspace,
)
from coordination.services import logs
from heatmap import health, story
from heatmap.models import DayCount, DayCountSeries
from heatmap.rollups.recount import recount

pytestmark = pytest.mark.django_db

DAY0 = datetime(2026, 10, 1, tzinfo=UTC)
REASONS = ("released", "expired", "forced")
TABLES = ("conflict", "denial", "lease", "claim")

row = st.tuples(
    st.sampled_from(TABLES),
    st.integers(0, 6 * 24 * 60 - 1),  # minutes after DAY0: six days
    st.one_of(st.none(), st.sampled_from(REASONS)),  # None: a lease or claim still held
    st.booleans(),  # forced (a conflict)
    st.booleans(),  # the second issue: a claim's, a conflict's holder
)
change = st.tuples(
    st.integers(0, 29),
    st.sampled_from(("release", "redate", "reason", "delete")),
    st.integers(-2 * 24 * 60, 2 * 24 * 60),
    st.sampled_from(REASONS),
)
window = st.tuples(st.integers(0, 8 * 24), st.integers(1, 8 * 24))  # hours


def write(
    issues: list[Issue],
    table: str,
    at: datetime,
    reason: str | None,
    forced: bool,
    second: bool,
    n: int,
):
    issue = issues[0]
    workspace = issue.workspace
    if table == "conflict":
        return ClaimConflict.objects.create(
            workspace=workspace,
            path="src/a.py",
            rejected_issue=issue,
            holding_issue=issues[second],
            forced=forced,
            occurred_at=at,
        )
    if table == "denial":
        denial = WipCapDenial.objects.create(
            workspace=workspace, project=issue.project, issue=issue, limit=1
        )
        WipCapDenial.objects.filter(pk=denial.pk).update(occurred_at=at)
        return denial
    released = {"released_at": at, "release_reason": reason} if reason else {}
    if table == "lease":  # an issue of its own: one unreleased lease per issue
        issue = Issue.objects.create(workspace=workspace, project=issue.project, title=f"L{n}")
        return IssueLease.objects.create(workspace=workspace, issue=issue, **released)
    claim = FileClaim.objects.create(
        workspace=workspace, issue=issues[second], path=f"f{n}.py", **released
    )
    FileClaim.objects.filter(pk=claim.pk).update(claimed_at=at - timedelta(hours=n % 30))
    return claim


def apply(written, what: str, minutes: int, reason: str) -> None:
    rows = type(written).objects.filter(pk=written.pk)
    time_field = "released_at" if isinstance(written, IssueLease | FileClaim) else "occurred_at"
    if what == "delete":
        rows.delete()
    elif what == "release" and time_field == "released_at":
        rows.filter(released_at__isnull=True).update(
            released_at=DAY0 + timedelta(minutes=abs(minutes)), release_reason=reason
        )
    elif what == "redate":
        rows.exclude(**{f"{time_field}__isnull": True}).update(
            **{time_field: DAY0 + timedelta(days=2, minutes=minutes)}
        )
    elif what == "reason" and time_field == "released_at":
        rows.exclude(released_at__isnull=True).update(release_reason=reason)


def every_series(workspace: Workspace, since: datetime, until: datetime):
    return {
        "conflicts": health.conflicts_per_day(workspace, since, until),
        "denials": health.wip_denials_per_day(workspace, since, until),
        "leases": health.releases_per_day(IssueLease, workspace, since, until),
        "claims": health.releases_per_day(FileClaim, workspace, since, until),
    }


def from_the_rows(workspace: Workspace, since: datetime, until: datetime):
    """The same series counted from the rows alone: the oracle."""
    window = {"since": since, "until": until}
    releases = {"kinds": health.RELEASE_SERIES, "time_field": "released_at"}
    return {
        "conflicts": health.per_day(
            ClaimConflict.objects.filter(workspace=workspace),
            time_field="occurred_at",
            kind_field="forced",
            kinds={False: "rejected", True: "forced"},
            **window,
        ),
        "denials": health.per_day(
            WipCapDenial.objects.filter(workspace=workspace),
            time_field="occurred_at",
            kind_field="workspace_id",
            kinds={workspace.pk: "WIP-cap denials"},
            **window,
        ),
        "leases": health.per_day(
            IssueLease.objects.filter(workspace=workspace),
            kind_field="release_reason",
            **releases,
            **window,
        ),
        "claims": health.per_day(
            FileClaim.objects.filter(workspace=workspace),
            kind_field="release_reason",
            **releases,
            **window,
        ),
    }


def board_counts(workspace: Workspace, since: datetime, until: datetime):
    cards = story.with_story(Issue.objects.filter(workspace=workspace), since=since, until=until)
    return {card.pk: (card.claims_in_window, card.conflicts_in_window) for card in cards}


def board_from_the_rows(workspace: Workspace, since: datetime, until: datetime):
    claims = Counter(
        FileClaim.objects.filter(
            workspace=workspace, claimed_at__gte=since, claimed_at__lt=until
        ).values_list("issue_id", flat=True)
    )
    conflicts = Counter()
    for rejected, holding in ClaimConflict.objects.filter(
        workspace=workspace, occurred_at__gte=since, occurred_at__lt=until
    ).values_list("rejected_issue_id", "holding_issue_id"):
        conflicts.update({rejected, holding})  # a conflict with itself once
    return {
        pk: (claims[pk], conflicts[pk])
        for pk in Issue.objects.filter(workspace=workspace).values_list("pk", flat=True)
    }


def sums(workspace: Workspace, *series: str) -> Counter:
    counts = (
        DayCount.objects.filter(workspace=workspace, series__in=series or DayCountSeries.values)
        .values_list("series", "kind", "day")
        .annotate(total=Sum("n"))
        .order_by()
    )
    return +Counter({(series, kind, day): total for series, kind, day, total in counts})


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(row, min_size=1, max_size=30),
    changes=st.lists(change, max_size=10),
    windows=st.lists(window, min_size=2, max_size=5),
)
def test_day_counts_count_what_the_rows_count(rows, changes, windows):
    workspace = Workspace.objects.create(slug=f"w-{uuid.uuid4().hex[:12]}", name="W")
    project = Project.objects.create(workspace=workspace, key="p", name="P")
    issues = [
        Issue.objects.create(workspace=workspace, project=project, title=title)
        for title in ("I", "J")
    ]
    with logs.unlocked(workspace.pk):  # the logs' door: counts follow re-dated conflicts
        written = [
            write(issues, table, DAY0 + timedelta(minutes=minutes), reason, forced, second, n)
            for n, (table, minutes, reason, forced, second) in enumerate(rows, start=1)
        ]
        for index, what, minutes, reason in changes:
            if index < len(written):
                apply(written[index], what, minutes, reason)
    for start, length in windows:
        since = DAY0 - timedelta(days=1) + timedelta(hours=start, minutes=start % 7)
        until = since + timedelta(hours=length)
        assert every_series(workspace, since, until) == from_the_rows(workspace, since, until)
        assert board_counts(workspace, since, until) == board_from_the_rows(workspace, since, until)
    kept = sums(workspace)
    DayCount.objects.filter(workspace=workspace).delete()
    recount(workspace.pk)
    assert sums(workspace) == kept


def test_a_release_counts_on_its_day_and_not_before(workspace, make_issue):
    issue = make_issue()
    claim = FileClaim.objects.create(workspace=workspace, issue=issue, path="a.py")
    assert not sums(workspace, "claim_releases")  # held: not a release
    FileClaim.objects.filter(pk=claim.pk).update(released_at=DAY0, release_reason="expired")
    assert sums(workspace, "claim_releases") == {("claim_releases", "expired", DAY0.date()): 1}
    FileClaim.objects.filter(pk=claim.pk).update(path="b.py")  # neither time nor kind
    assert DayCount.objects.filter(workspace=workspace, series="claim_releases").count() == 1


def test_a_window_of_whole_days_reads_the_counts_not_the_rows(
    workspace, make_issue, django_assert_num_queries
):
    issue = make_issue()
    for hour in range(0, 5 * 24, 5):
        write([issue], "conflict", DAY0 + timedelta(hours=hour), None, hour % 2 == 0, False, 0)
    with logs.unlocked(workspace.pk):  # the rows gone, the counts too
        ClaimConflict.objects.filter(workspace=workspace).delete()
    assert sums(workspace) == {}
    for hour in range(0, 5 * 24, 5):
        write([issue], "conflict", DAY0 + timedelta(hours=hour), None, hour % 2 == 0, False, 0)
    since, until = DAY0 + timedelta(hours=12), DAY0 + timedelta(days=4, hours=12)
    with django_assert_num_queries(2):  # the counts of the whole days, the rows of the ends
        series = health.conflicts_per_day(workspace, since, until)
    assert series == from_the_rows(workspace, since, until)["conflicts"]
    assert series.total == len([h for h in range(0, 5 * 24, 5) if 12 <= h < 4 * 24 + 12])
