"""The daily rollups against the event rows they count (invariant 14 (rollups); SQLite and
PostgreSQL).

Any history, written in any order (back-dated rows included), with rows deleted and
moved to other days, gives the same counts from the rollups as from the rows, in any
window, and rollups that ``recount`` would build again. The raw rows are the oracle.
"""

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from itertools import groupby

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordination.models import ClaimConflict, FileClaim, Issue, Project, Workspace
from coordination.services import logs
from heatmap import raw
from heatmap.models import RollupDay, RollupKey
from heatmap.rollups import days_of, path_counts
from heatmap.rollups.recount import recount
from heatmap.selectors import code_heatmap

pytestmark = pytest.mark.django_db

DAY0 = datetime(2026, 10, 1, tzinfo=UTC)
PATHS = ("src/api/views.py", "src/api/", "src/web/app.tsx", "srcs/x.py", "README.md", "docs/a.md")
PREFIXES = ("", "src", "src/api", "docs")

event = st.tuples(
    st.sampled_from(("claims", "contention")),
    st.integers(0, 1),  # which project
    st.sampled_from(PATHS),
    st.integers(0, 12 * 24 * 60 - 1),  # minutes after DAY0: twelve days
)
window = st.tuples(st.integers(0, 13 * 24), st.integers(1, 13 * 24))  # hours


def oracle(workspace, mode, since, until, project, prefix) -> dict[str, int]:
    rows = raw.events(
        workspace, mode=mode, since=since, until=until, project=project, prefix=prefix
    )
    return dict(rows.values_list("path").annotate(n=Count("*")).order_by())


def write(issue: Issue, mode: str, path: str, at: datetime) -> FileClaim | ClaimConflict:
    if mode == "claims":
        claim = FileClaim.objects.create(
            workspace=issue.workspace,
            issue=issue,
            path=path,
            released_at=at + timedelta(minutes=1),
            release_reason="released",
        )
        FileClaim.objects.filter(pk=claim.pk).update(claimed_at=at)
        return claim
    return ClaimConflict.objects.create(
        workspace=issue.workspace,
        path=path,
        rejected_issue=issue,
        holding_issue=issue,
        occurred_at=at,
    )


def day_rows(workspace: Workspace) -> list[tuple]:
    """Every rollup row of ``workspace``, with its key's bounds: each key's rows in
    day order."""
    return list(
        RollupDay.objects.filter(key__workspace=workspace)
        .order_by("key__mode", "key__project_id", "key__path", "day")
        .values_list(
            "key__mode",
            "key__project_id",
            "key__path",
            "day",
            "n",
            "before",
            "key__first_day",
            "key__last_day",
            "key__total",
        )
    )


def assert_every_day_counted(rows: list[tuple]) -> None:
    """Each key has one row for every day from its first day to its last, and none
    outside; every row's ``before`` is the sum of its key's earlier ``n``, and the
    key's ``total`` the sum of all."""
    for _, days in groupby(rows, key=lambda row: row[:3]):
        days = list(days)
        first_day, last_day, total = days[0][6:]
        assert [row[3] for row in days] == [
            first_day + timedelta(days=offset) for offset in range((last_day - first_day).days + 1)
        ]
        seen = 0
        for row in days:
            assert row[5] == seen
            seen += row[4]
        assert total == seen


def assert_consistent(workspace: Workspace) -> None:
    """The rollups hold their invariant, and count what ``recount`` counts from the
    rows (a removal leaves its days in place, at fewer events)."""
    rows = day_rows(workspace)
    assert_every_day_counted(rows)
    assert RollupKey.objects.filter(workspace=workspace).count() == len({row[:3] for row in rows})
    recount(workspace.pk)
    rebuilt = day_rows(workspace)
    assert_every_day_counted(rebuilt)
    assert [row[:5] for row in rows if row[4]] == [row[:5] for row in rebuilt if row[4]]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    events=st.lists(event, min_size=1, max_size=40),
    removed=st.sets(st.integers(0, 39), max_size=6),
    moved=st.lists(st.tuples(st.integers(0, 39), st.integers(-3 * 24, 3 * 24)), max_size=6),
    windows=st.lists(
        st.tuples(window, st.sampled_from(PREFIXES), st.booleans()), min_size=3, max_size=6
    ),
)
def test_rollups_count_what_the_rows_count(events, removed, moved, windows):
    workspace = Workspace.objects.create(slug=f"w-{uuid.uuid4().hex[:12]}", name="W")
    projects = [
        Project.objects.create(workspace=workspace, key=key, name=key) for key in ("p0", "p1")
    ]
    issues = [Issue.objects.create(workspace=workspace, project=p, title="I") for p in projects]
    written = [
        write(issues[project], mode, path, DAY0 + timedelta(minutes=minutes))
        for mode, project, path, minutes in events
    ]
    with logs.unlocked(workspace.pk):  # the logs' door: the counts follow even a moved conflict row
        for index, hours in moved:  # re-dated, as the demo's clock moves claims into the past
            if index < len(written):
                row = written[index]
                field = "claimed_at" if isinstance(row, FileClaim) else "occurred_at"
                type(row).objects.filter(pk=row.pk).update(
                    **{field: DAY0 + timedelta(minutes=events[index][3], hours=hours)}
                )
        for index in removed:
            if index < len(written):
                written[index].delete()
    for (start, length), prefix, by_project in windows:
        since = DAY0 - timedelta(days=3) + timedelta(hours=start, minutes=start % 7)
        until = since + timedelta(hours=length)
        for mode in ("claims", "contention"):
            project = projects[start % 2] if by_project else None
            assert path_counts(
                workspace, mode=mode, since=since, until=until, project=project, prefix=prefix
            ) == oracle(workspace, mode, since, until, project, prefix)
    assert_consistent(workspace)


def test_the_days_of_a_window_run_from_midnight_to_midnight():
    day = timedelta(days=1)
    assert days_of(DAY0, DAY0 + 2 * day) == ((DAY0.date(), (DAY0 + 2 * day).date()), [])
    late = DAY0 + timedelta(hours=1)
    assert days_of(late, late + 2 * day) == (  # up to the midnight after ``until``
        ((DAY0 + day).date(), (DAY0 + 3 * day).date()),
        [(late, DAY0 + day, 1), (late + 2 * day, DAY0 + 3 * day, -1)],
    )
    assert days_of(late, late + timedelta(hours=3)) == (
        None,
        [(late, late + timedelta(hours=3), 1)],
    )
    last = datetime.max.replace(tzinfo=UTC)
    assert days_of(last - timedelta(hours=2), last) == (
        None,
        [(last - timedelta(hours=2), last, 1)],
    )
    lastday = last.replace(hour=0, minute=0, second=0, microsecond=0)
    assert days_of(lastday - day, last) == (  # no midnight after the last day
        ((lastday - day).date(), lastday.date()),
        [(lastday, last, 1)],
    )


def test_a_window_at_the_end_of_time_is_counted(workspace):
    last = datetime.max.replace(tzinfo=UTC)
    since = last - timedelta(days=3, hours=5)
    assert path_counts(workspace, mode="claims", since=since, until=last) == {}


def test_a_ninety_day_heatmap_is_one_query_and_reads_one_row_per_path(
    workspace, make_issue, add_claim, django_assert_num_queries
):
    issue = make_issue()
    for day in range(90):
        for index in range(3):
            add_claim(issue, f"src/m{index}/f.py", DAY0 + timedelta(days=day, hours=index))
    since = DAY0 + timedelta(hours=6)
    with django_assert_num_queries(1):
        heatmap = code_heatmap(
            workspace, mode="claims", since=since, until=since + timedelta(days=89)
        )
    assert heatmap.total == 89 * 3
    assert RollupKey.objects.filter(workspace=workspace).count() == 3
    assert RollupDay.objects.filter(key__workspace=workspace).count() == 90 * 3


def test_a_project_counts_the_events_of_its_issues(workspace, project, make_issue, add_claim):
    other = Project.objects.create(workspace=workspace, key="web", name="Web")
    add_claim(make_issue(), "src/a.py", DAY0 + timedelta(hours=1))
    add_claim(make_issue(project=other), "src/a.py", DAY0 + timedelta(hours=2))
    add_claim(make_issue(project=other), "src/b.py", DAY0 + timedelta(days=1, hours=2))
    window = {"since": DAY0, "until": DAY0 + timedelta(days=3)}
    assert path_counts(workspace, mode="claims", project=other, **window) == {
        "src/a.py": 1,
        "src/b.py": 1,
    }
    assert path_counts(workspace, mode="claims", **window) == {"src/a.py": 2, "src/b.py": 1}
    assert Counter(RollupKey.objects.values_list("project__key", flat=True)) == {
        "core": 1,
        "web": 2,
    }


def test_recount_command_rebuilds_one_workspace(workspace, other_workspace, make_issue, add_claim):
    add_claim(make_issue(), "src/a.py", DAY0)
    add_claim(make_issue(), "src/a.py", DAY0 + timedelta(days=2))
    counted = ("key__path", "key__total", "day", "n", "before")
    # add_claim writes a claim now and moves it back: the days since stay, at 0 events.
    before = [row for row in RollupDay.objects.order_by("day").values_list(*counted) if row[3]]
    RollupDay.objects.all().delete()
    RollupKey.objects.all().delete()
    call_command("recount_heatmap", "--workspace", workspace.slug, stdout=None)
    assert list(RollupDay.objects.order_by("day").values_list(*counted)) == [
        ("src/a.py", 2, DAY0.date(), 1, 0),
        ("src/a.py", 2, DAY0.date() + timedelta(days=1), 0, 1),  # the day between too
        ("src/a.py", 2, DAY0.date() + timedelta(days=2), 1, 1),
    ]
    assert before == [row for row in RollupDay.objects.values_list(*counted) if row[3]]
    with pytest.raises(CommandError, match="No workspace"):
        call_command("recount_heatmap", "--workspace", "nope")


def test_one_statement_of_many_days_fills_every_day_between(workspace, make_issue):
    """A bulk insert (one statement: PostgreSQL's trigger sees all its rows at once) of
    a new key's days, and of days on both sides of a key's rows, leaves no gap."""
    issue = make_issue()
    conflict = {"workspace": workspace, "rejected_issue": issue, "holding_issue": issue}
    ClaimConflict.objects.bulk_create(
        ClaimConflict(path=path, occurred_at=DAY0 + timedelta(days=days), **conflict)
        for path, days in (("a.py", 0), ("a.py", 4), ("a.py", 9), ("b.py", 5))
    )
    ClaimConflict.objects.bulk_create(
        ClaimConflict(path=path, occurred_at=DAY0 + timedelta(days=days), **conflict)
        for path, days in (("b.py", 1), ("b.py", 8), ("a.py", 2))
    )
    assert_consistent(workspace)
    rows = day_rows(workspace)
    assert [row[3] for row in rows if row[2] == "b.py"] == [
        DAY0.date() + timedelta(days=d) for d in range(1, 9)
    ]
    window = {"since": DAY0 + timedelta(days=3), "until": DAY0 + timedelta(days=9)}
    assert path_counts(workspace, mode="contention", **window) == {"a.py": 1, "b.py": 2}
