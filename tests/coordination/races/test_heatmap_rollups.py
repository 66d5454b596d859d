"""The heatmap's rollups stay exact under concurrent writers (invariant 14 (rollups), PostgreSQL).

The race the key lock closes: one transaction makes a key's first row of a new day,
computing ``before`` from the rows it sees, while another adds to an earlier day of
the same key and updates only the later rows it sees (an event at 23:59:59.9 whose
transaction commits after one at 00:00:00.1). Each writer locks the key's row first,
so the second waits for the first's commit and then sees its rows.
"""

import random
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction

from coordination.models import Issue, Project, Workspace
from heatmap.models import RollupDay
from heatmap.rollups import path_counts
from tests.coordination.races.conftest import hold_and_race, run_in_threads
from tests.heatmap.test_rollups import assert_consistent, write

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

MIDNIGHT = datetime(2026, 11, 2, tzinfo=UTC)
PATH = "src/api/views.py"


@pytest.fixture
def issue() -> Issue:
    workspace = Workspace.objects.create(slug="acme", name="Acme")
    project = Project.objects.create(workspace=workspace, key="core", name="Core")
    return Issue.objects.create(workspace=workspace, project=project, title="Hot file")


def conflict(issue: Issue, at: datetime, path: str = PATH) -> None:
    write(issue, "contention", path, at)


def count(issue: Issue) -> int:
    counts = path_counts(
        issue.workspace,
        mode="contention",
        since=MIDNIGHT - timedelta(days=2),
        until=MIDNIGHT + timedelta(days=2),
    )
    return counts.get(PATH, 0)


@pytest.mark.parametrize("held_day", ["before midnight", "after midnight"])
def test_a_day_written_while_another_is_open_waits_for_it(issue, held_day):
    """Either order: the held transaction writes one side of midnight, the racer the
    other (the racer's day new to the key); the racer queues on the key's row."""
    conflict(issue, MIDNIGHT - timedelta(days=1))  # the key and an older day exist
    late, early = MIDNIGHT + timedelta(seconds=0.1), MIDNIGHT - timedelta(seconds=0.1)
    held, raced = (early, late) if held_day == "before midnight" else (late, early)

    def holder(let_racer_in):
        conflict(issue, held)
        return let_racer_in()

    def racer():
        with transaction.atomic():
            conflict(issue, raced)

    racer_finished_first, raced_result = hold_and_race(holder, racer)
    assert racer_finished_first is False  # it waited on the key's row lock
    assert raced_result is None
    assert count(issue) == 3
    assert_consistent(issue.workspace)


def test_many_writers_of_one_key_on_days_in_any_order(issue):
    rng = random.Random(7)
    plans = [
        [MIDNIGHT + timedelta(hours=rng.randint(-36, 36), seconds=rng.random()) for _ in range(15)]
        for _ in range(8)
    ]

    def write(moments):
        for at in moments:
            with transaction.atomic():
                conflict(issue, at)
                conflict(issue, at, path="src/other.py")

    results = run_in_threads(write, [(moments,) for moments in plans])
    assert results == [None] * len(plans)
    assert count(issue) == sum(len(moments) for moments in plans)
    assert RollupDay.objects.filter(key__path=PATH).count() == len(
        {at.date() for moments in plans for at in moments}
    )
    assert_consistent(issue.workspace)
