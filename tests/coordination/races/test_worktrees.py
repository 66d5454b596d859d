"""Dispatch races on PostgreSQL: real threads, each with its own connection.

Invariant 10 under READ COMMITTED: cognitive runs never serialise, and coders bound
to one worktree get exactly one writer however their dispatches interleave.
"""

import pytest

from coordination.errors import WorktreeBusy
from coordination.models import IssueLease, Project, ReleaseReason, Run, Worktree, WorktreeLock
from coordination.services import worktrees
from tests.conftest import expire, run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROUNDS = 10


def dispatch(workspace, session_id, issue_id):
    return worktrees.dispatch_run(workspace=workspace, session_id=session_id, issue_id=issue_id)


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
        runs = Run.objects.filter(issue__project=project)
        assert runs.filter(status="running").count() == 1
        assert runs.filter(status="cancelled", error="worktree_busy").count() == 3
        assert WorktreeLock.objects.filter(released_at__isnull=True).get().run_id == winner.pk
        # The three losers keep their leases, to retry on their next beat.
        assert IssueLease.objects.live().filter(issue__project=project).count() == 4

        worktrees.finish_run(workspace=workspace, run_id=winner.pk, outcome="succeeded")
        retry_run = Run.objects.get(pk=busy[0].extra["run"])
        retried = dispatch(workspace, retry_run.session_id, retry_run.issue_id)

        assert retried.status == "running" and retried.lock_mode == "exclusive"
        assert WorktreeLock.objects.filter(released_at__isnull=True).get().run_id == retried.pk
        worktrees.finish_run(workspace=workspace, run_id=retried.pk, outcome="succeeded")


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
        worktrees.finish_run(workspace=workspace, run_id=winners[0].pk, outcome="succeeded")
