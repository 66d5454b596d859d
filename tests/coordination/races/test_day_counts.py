"""Releasers of one workspace never queue on its day counts, and the counts stay exact
(invariant 15 (day counts), PostgreSQL).

Every release of the workspace adds to the same day's count. Were it one row, each
releaser would hold it to its commit and the next would wait; each adds instead to a
row no open transaction holds (``FOR UPDATE SKIP LOCKED``), or makes one.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.db.models import Sum

from coordination.models import FileClaim, Issue, Project, Workspace
from coordination.services import bulk
from heatmap.models import DayCount
from heatmap.rollups import path_counts
from tests.coordination.races.conftest import hold_and_race, run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DAY = datetime(2026, 11, 2, 12, tzinfo=UTC)


@pytest.fixture
def issue() -> Issue:
    workspace = Workspace.objects.create(slug="acme", name="Acme")
    project = Project.objects.create(workspace=workspace, key="core", name="Core")
    return Issue.objects.create(workspace=workspace, project=project, title="Busy")


def claims(issue: Issue, count: int) -> list[int]:
    return [
        FileClaim.objects.create(workspace=issue.workspace, issue=issue, path=f"f{n}.py").pk
        for n in range(count)
    ]


def release(pk: int) -> int:
    return FileClaim.objects.filter(pk=pk, released_at__isnull=True).update(
        released_at=DAY, release_reason="released"
    )


def releases(issue: Issue):
    return DayCount.objects.filter(workspace=issue.workspace, series="claim_releases")


def counted(issue: Issue) -> int:
    return releases(issue).aggregate(n=Sum("n"))["n"] or 0


def test_a_release_beside_an_open_one_does_not_wait_for_it(issue):
    done, held, raced = claims(issue, 3)
    release(done)  # the day has its row, held by no one

    def holder(let_racer_in):
        release(held)  # adds to that row, and holds it to this commit
        return let_racer_in()

    def racer():
        with transaction.atomic():
            return release(raced)

    racer_finished_first, released = hold_and_race(holder, racer)
    assert racer_finished_first is True  # it made a row of its own, it did not queue
    assert released == 1
    assert counted(issue) == 3
    assert releases(issue).count() == 2


def test_many_releasers_at_once_count_every_release(issue):
    pks = claims(issue, 80)
    batches = [pks[n::8] for n in range(8)]

    def release_all(batch):
        released = 0
        for pk in batch:
            with transaction.atomic():
                released += release(pk)
        return released

    assert run_in_threads(release_all, [(batch,) for batch in batches]) == [10] * 8
    assert counted(issue) == 80
    assert releases(issue).count() <= 8


def test_a_writer_beside_a_bulk_load_waits_for_it_and_is_counted(issue):
    """A bulk load turns the triggers off in its transaction (its DDL holds the tables
    until its commit), so another workspace's claim meanwhile queues behind it, then
    counts through the triggers again: no row escapes the rollups or the day counts."""
    other = Workspace.objects.create(slug="globex", name="Globex")
    other_issue = Issue.objects.create(
        workspace=other,
        project=Project.objects.create(workspace=other, key="core", name="Core"),
        title="Elsewhere",
    )

    def loader(let_racer_in):
        with bulk.loading(issue.workspace.pk):
            FileClaim.objects.bulk_create(
                FileClaim(
                    workspace=issue.workspace,
                    issue=issue,
                    path=f"f{n}.py",
                    claimed_at=DAY,
                    released_at=DAY,
                    release_reason="released",
                )
                for n in range(5)
            )
            return let_racer_in()

    def writer():
        claim = FileClaim.objects.create(workspace=other, issue=other_issue, path="g.py")
        return release(claim.pk)

    writer_finished_first, released = hold_and_race(loader, writer)
    assert writer_finished_first is False  # it queued behind the load's transaction
    assert released == 1
    assert counted(issue) == 5
    assert counted(other_issue) == 1
    window = {"since": DAY - timedelta(days=400), "until": DAY + timedelta(days=400)}
    assert path_counts(other, mode="claims", **window) == {"g.py": 1}
    assert len(path_counts(issue.workspace, mode="claims", **window)) == 5
