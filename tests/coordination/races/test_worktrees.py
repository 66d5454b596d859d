"""Dispatch races on PostgreSQL: real threads, each with its own connection.

Invariant 10 (lock mode per run) under READ COMMITTED: cognitive runs never serialise, and coders
bound to one worktree get exactly one writer however their dispatches interleave.
"""

import random
import time

import pytest

from coordination.errors import StaleFence, WorktreeBusy
from coordination.models import IssueLease, Project, ReleaseReason, Run, Worktree, WorktreeLock
from coordination.services import runs
from tests.conftest import expire
from tests.coordination.conftest import dispatch_run, lock_fences, lock_of
from tests.coordination.races.conftest import FENCE_ROUNDS, run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROUNDS = 10


def dispatch(workspace, session_id, issue_id):
    return runs.dispatch_run(workspace=workspace, session_id=session_id, issue_id=issue_id)


def test_four_cognitive_runs_dispatched_at_once_all_run(workspace, make_issue, make_session):
    project = Project.objects.create(workspace=workspace, key="think", name="T", agent_wip_limit=4)
    sessions = [make_session(f"writer-{n}") for n in range(4)]
    issues = [make_issue(project=project, requires_filesystem=False) for _ in range(4)]

    results = run_in_threads(
        dispatch, [(workspace, s.pk, i.pk) for s, i in zip(sessions, issues, strict=True)]
    )

    assert all(isinstance(r, Run) and r.status == "running" for r in results), results
    assert Run.objects.filter(status="running", lock_mode="none").count() == 4
    assert not WorktreeLock.objects.exists()


def test_four_coders_on_one_worktree_get_exactly_one_writer(workspace, make_issue, make_session):
    Worktree.objects.create(workspace=workspace, slug="main", name="Main")
    sessions = [make_session(f"coder-{n}", worktree_slug="main") for n in range(4)]
    for round_number in range(ROUNDS):
        project = Project.objects.create(
            workspace=workspace, key=f"code{round_number}", name="C", agent_wip_limit=10
        )
        issues = [make_issue(project=project, requires_filesystem=True) for _ in range(4)]

        results = run_in_threads(
            dispatch, [(workspace, s.pk, i.pk) for s, i in zip(sessions, issues, strict=True)]
        )

        winners = [r for r in results if isinstance(r, Run)]
        busy = [r for r in results if isinstance(r, WorktreeBusy)]
        assert len(winners) == 1 and len(busy) == 3, (round_number, results)
        winner = winners[0]
        assert {b.extra["holder"]["run"] for b in busy} == {winner.pk}
        project_runs = Run.objects.filter(issue__project=project)
        assert project_runs.filter(status="running").count() == 1
        assert project_runs.filter(status="cancelled", error="worktree_busy").count() == 3
        assert WorktreeLock.objects.filter(released_at__isnull=True).get().run_id == winner.pk
        # The three losers keep their leases, to retry on their next beat.
        assert IssueLease.objects.live().filter(issue__project=project).count() == 4

        runs.finish_run(workspace=workspace, run_id=winner.pk, outcome="succeeded")
        retry_run = Run.objects.get(pk=busy[0].extra["run"])
        retried = dispatch(workspace, retry_run.session_id, retry_run.issue_id)

        assert retried.status == "running" and retried.lock_mode == "exclusive"
        assert WorktreeLock.objects.filter(released_at__isnull=True).get().run_id == retried.pk
        runs.finish_run(workspace=workspace, run_id=retried.pk, outcome="succeeded")


def test_two_dispatchers_race_to_reclaim_a_dead_holders_lock(
    workspace, project, make_issue, make_session
):
    tree = Worktree.objects.create(workspace=workspace, slug="main", name="Main")
    project.agent_wip_limit = 100
    project.save()
    for _ in range(ROUNDS):
        dead = make_session("dead")
        stale = dispatch(workspace, dead.pk, make_issue(worktree=tree).pk)
        expire(dead)
        a, b = make_session("a"), make_session("b")
        issues = [make_issue(worktree=tree), make_issue(worktree=tree)]

        results = run_in_threads(
            dispatch, [(workspace, a.pk, issues[0].pk), (workspace, b.pk, issues[1].pk)]
        )

        winners = [r for r in results if isinstance(r, Run)]
        assert len(winners) == 1, results
        assert isinstance(next(r for r in results if r not in winners), WorktreeBusy)
        assert WorktreeLock.objects.get(run=stale).release_reason == ReleaseReason.EXPIRED
        assert WorktreeLock.objects.filter(released_at__isnull=True).get().run_id == winners[0].pk
        runs.finish_run(workspace=workspace, run_id=winners[0].pk, outcome="succeeded")


# --- fences ---------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_lost_runs_finish_racing_a_dispatch_onto_its_worktree_has_exactly_one_winner(
    workspace, make_issue, make_session, tree, roomy
):
    """Each round: the old run's session is expired; it finishes with its lock's fence
    while another session dispatches onto the same worktree. Either the finish lands
    first (and the dispatch takes the free worktree), or the reclaim does (and the
    finish is refused ``stale_fence``, the old run left as it was)."""

    def act(kind, session_id, target, fence=None):
        if kind == "finish":
            # The dispatcher claims a lease before it reaches the worktree: delay the
            # finisher by 0 to 80 ms so that both orders happen.
            time.sleep(random.uniform(0, 0.08))
            return runs.finish_run(
                workspace=workspace, run_id=target, outcome="succeeded", fence=fence
            )
        return runs.dispatch_run(workspace=workspace, session_id=session_id, issue_id=target)

    outcomes = []
    for round_number in range(FENCE_ROUNDS):
        old, new = make_session(f"old-{round_number}"), make_session(f"new-{round_number}")
        old_run = dispatch_run(workspace, old, make_issue(worktree=tree))
        old_fence = lock_of(old_run).fence
        expire(old)

        finished, dispatched = run_in_threads(
            act,
            [
                ("finish", old.pk, old_run.pk, old_fence),
                ("dispatch", new.pk, make_issue(worktree=tree).pk),
            ],
        )

        assert isinstance(dispatched, Run) and dispatched.status == "running", dispatched
        new_lock = lock_of(dispatched)
        assert new_lock.fence > old_fence and new_lock.released_at is None
        old_lock = lock_of(old_run)
        if isinstance(finished, StaleFence):
            outcomes.append("reclaimed")
            assert old_lock.release_reason == ReleaseReason.EXPIRED
            assert Run.objects.get(pk=old_run.pk).status == Run.Status.RUNNING
        else:
            outcomes.append("finished")
            assert isinstance(finished, Run) and finished.status == "succeeded", finished
            assert old_lock.release_reason == ReleaseReason.RELEASED
        assert WorktreeLock.objects.filter(worktree=tree, released_at__isnull=True).count() == 1
        runs.finish_run(
            workspace=workspace, run_id=dispatched.pk, outcome="succeeded", fence=new_lock.fence
        )

    assert lock_fences(tree) == list(range(1, 2 * FENCE_ROUNDS + 1))
    print("outcomes:", {kind: outcomes.count(kind) for kind in set(outcomes)})
