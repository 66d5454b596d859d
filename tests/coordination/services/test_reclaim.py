"""Reclaim a dead holder, then retry: one loop and one budget for leases, worktree
locks and file claims (invariant 4 (stale reclaim))."""

import pytest

from coordination.errors import FileConflict, WorktreeBusy
from coordination.models import IssueLease, ReleaseReason
from coordination.services import file_claims, leases, reclaim, runs, worktrees
from coordination.services.file_claims import claim as claiming
from tests.conftest import expire

pytestmark = pytest.mark.django_db


def test_an_attempt_that_returns_ends_the_loop():
    tried: list[int] = []

    def attempt(number: int) -> str:
        tried.append(number)
        if number < 2:
            raise reclaim.Retry
        return "taken"

    assert reclaim.attempts(attempt, exhausted=lambda: "spent") == "taken"
    assert tried == [0, 1, 2]


def test_the_budget_is_spent_after_its_attempts_then_the_caller_reports():
    tried: list[int] = []

    def attempt(number: int) -> str:
        tried.append(number)
        raise reclaim.Retry

    assert reclaim.attempts(attempt, exhausted=lambda: "spent") == "spent"
    assert tried == list(range(reclaim.ATTEMPTS))


def test_a_dead_holders_row_is_released_expired_and_the_take_retries(
    workspace, issue, make_session
):
    dead = make_session("dead")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=dead.pk).lease
    expire(dead)
    announced: list[int] = []

    with pytest.raises(reclaim.Retry):
        reclaim.clear_the_way(lease, reclaimed=lambda: announced.append(lease.pk))

    lease.refresh_from_db()
    assert lease.release_reason == ReleaseReason.EXPIRED and announced == [lease.pk]


def test_a_row_released_since_it_was_read_is_out_of_the_way(workspace, issue, make_session):
    holder = make_session("holder")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=holder.pk).lease
    leases.release_issue(workspace=workspace, issue_id=issue.pk, session_id=holder.pk)

    with pytest.raises(reclaim.Retry):
        reclaim.clear_the_way(lease, reclaimed=lambda: pytest.fail("nothing was reclaimed"))
    assert IssueLease.objects.get(pk=lease.pk).release_reason == ReleaseReason.RELEASED


def test_a_live_holder_keeps_its_row(workspace, issue, make_session):
    holder = make_session("holder")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=holder.pk).lease

    reclaim.clear_the_way(lease)  # returns: the take is refused

    assert IssueLease.objects.get(pk=lease.pk).released_at is None


def test_a_worktree_lock_that_keeps_changing_hands_spends_the_same_budget(
    monkeypatch, workspace, tree, make_issue, make_session
):
    issue = make_issue(worktree=tree)
    session = make_session("runner")
    inserts: list[int] = []

    def refused(**kwargs):
        inserts.append(kwargs["run_id"])
        return None  # every insert meets a lock that is gone when looked for

    monkeypatch.setattr(worktrees, "insert_lock", refused)
    with pytest.raises(WorktreeBusy):
        runs.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=issue.pk)
    assert len(inserts) == reclaim.ATTEMPTS


def test_a_file_claim_whose_paths_keep_changing_hands_spends_the_same_budget(
    monkeypatch, workspace, issue, make_session
):
    session = make_session("claimer")
    attempts: list[str] = []

    def raced(**kwargs):
        attempts.append(kwargs["wanted_paths"]()[0])
        raise reclaim.Retry

    monkeypatch.setattr(claiming, "_attempt", raced)
    with pytest.raises(FileConflict, match="changed hands"):
        file_claims.claim_files(
            workspace=workspace, issue_id=issue.pk, paths=["a.py"], session_id=session.pk
        )
    assert attempts == ["a.py"] * reclaim.ATTEMPTS
