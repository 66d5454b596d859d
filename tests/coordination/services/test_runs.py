"""Runs: dispatch (lease, resolution, worktree lock), the recorded failures, finishing
and cancelling."""

import pytest

from coordination.errors import (
    InvalidInput,
    LeaseHeld,
    NotFound,
    RunNotRunning,
    SessionNotLive,
    WipLimitReached,
    WorktreeBusy,
    WorktreeUnresolved,
)
from coordination.models import (
    AgentSession,
    IssueLease,
    ReleaseReason,
    Run,
    WipCapDenial,
    Worktree,
    WorktreeLock,
)
from coordination.services import agents, leases, operators
from coordination.services.runs import dispatch_run, finish_run
from tests.api_helpers import V1, post
from tests.conftest import expire
from tests.coordination.conftest import lock_fences, lock_of

pytestmark = pytest.mark.django_db


def dispatch(workspace, session, issue):
    return dispatch_run(workspace=workspace, session_id=session.pk, issue_id=issue.pk)


def finish(workspace, run, outcome="succeeded"):
    return finish_run(workspace=workspace, run_id=run.pk, outcome=outcome)


@pytest.fixture
def coder(make_session, tree):
    return make_session("coder-1", worktree_slug=tree.slug)


def unreleased_lease(issue):
    return IssueLease.objects.filter(issue=issue, released_at__isnull=True).first()


# --- decision table, through dispatch --------------------------------------------------


def test_cognitive_run_takes_the_lease_and_no_lock(workspace, issue, make_session):
    session = make_session("planner")

    run = dispatch(workspace, session, issue)

    assert (run.status, run.lock_mode, run.worktree, run.error) == ("running", "none", None, "")
    assert run.session_id == session.pk and run.agent_id == session.agent_id
    assert unreleased_lease(issue).session_id == session.pk
    assert not WorktreeLock.objects.exists()


def test_explicit_worktree_run_locks_it(workspace, make_issue, make_session, tree):
    issue = make_issue(worktree=tree)
    session = make_session("writer")

    run = dispatch(workspace, session, issue)

    assert (run.status, run.lock_mode, run.worktree_id) == ("running", "exclusive", tree.pk)
    lock = WorktreeLock.objects.get()
    assert (lock.worktree_id, lock.run_id, lock.session_id) == (tree.pk, run.pk, session.pk)
    assert lock.released_at is None


def test_filesystem_run_locks_the_agents_worktree(workspace, make_issue, coder, tree, project):
    project.primary_worktree = Worktree.objects.create(workspace=workspace, slug="p", name="P")
    project.save()
    issue = make_issue(requires_filesystem=True)

    run = dispatch(workspace, coder, issue)

    assert (run.lock_mode, run.worktree_id) == ("exclusive", tree.pk)
    assert WorktreeLock.objects.get().worktree_id == tree.pk


def test_filesystem_run_locks_the_projects_primary(workspace, make_issue, make_session, project):
    primary = Worktree.objects.create(workspace=workspace, slug="primary", name="Primary")
    project.primary_worktree = primary
    project.save()
    issue = make_issue(requires_filesystem=True)

    run = dispatch(workspace, make_session("unbound"), issue)

    assert (run.lock_mode, run.worktree_id) == ("exclusive", primary.pk)
    assert WorktreeLock.objects.get().worktree_id == primary.pk


def test_primary_worktree_run_locks_it_beside_the_agents_own_run(
    workspace, make_issue, coder, tree, project
):
    primary = Worktree.objects.create(workspace=workspace, slug="primary", name="Primary")
    project.primary_worktree = primary
    project.save()
    issue = make_issue(requires_filesystem=True)
    own = dispatch(workspace, coder, issue)

    run = dispatch_run(
        workspace=workspace, session_id=coder.pk, issue_id=issue.pk, primary_worktree=True
    )

    assert (own.worktree_id, run.lock_mode, run.worktree_id) == (tree.pk, "exclusive", primary.pk)
    held = WorktreeLock.objects.filter(released_at__isnull=True)
    assert sorted(held.values_list("worktree_id", flat=True)) == sorted([tree.pk, primary.pk])
    assert IssueLease.objects.filter(issue=issue).count() == 1


def test_primary_worktree_runs_of_two_issues_take_turns(
    workspace, make_issue, make_session, project
):
    project.primary_worktree = Worktree.objects.create(workspace=workspace, slug="pr", name="P")
    project.save()
    a, b = make_session("a"), make_session("b")
    first = dispatch_run(
        workspace=workspace, session_id=a.pk, issue_id=make_issue().pk, primary_worktree=True
    )
    issue = make_issue()

    with pytest.raises(WorktreeBusy) as raised:
        dispatch_run(workspace=workspace, session_id=b.pk, issue_id=issue.pk, primary_worktree=True)

    assert raised.value.extra["holder"]["run"] == first.pk
    finish(workspace, first)
    again = dispatch_run(
        workspace=workspace, session_id=b.pk, issue_id=issue.pk, primary_worktree=True
    )
    assert again.worktree_id == project.primary_worktree_id


def test_primary_worktree_run_without_one_is_refused_and_nothing_changes(
    workspace, issue, make_session
):
    session = make_session()

    with pytest.raises(InvalidInput) as raised:
        dispatch_run(
            workspace=workspace, session_id=session.pk, issue_id=issue.pk, primary_worktree=True
        )

    assert raised.value.extra["field"] == "primary_worktree"
    assert "no primary worktree" in raised.value.detail
    assert not Run.objects.exists() and not IssueLease.objects.exists()


def test_dispatch_with_the_lease_already_held_reuses_it(workspace, issue, make_session):
    session = make_session()
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk).lease

    dispatch(workspace, session, issue)

    assert IssueLease.objects.filter(issue=issue).count() == 1
    assert unreleased_lease(issue).pk == lease.pk


# --- failure modes -------------------------------------------------------------------


def test_unresolved_run_is_skipped_and_releases_the_lease(workspace, make_issue, make_session):
    Worktree.objects.create(workspace=workspace, slug="unnamed", name="Nobody chose it")
    issue = make_issue(requires_filesystem=True)
    session = make_session("unbound")

    with pytest.raises(WorktreeUnresolved) as raised:
        dispatch(workspace, session, issue)

    assert raised.value.status == 422
    run = Run.objects.get()  # recorded although the call failed
    assert raised.value.extra["run"] == run.pk
    assert (run.status, run.error, run.lock_mode, run.worktree) == (
        "skipped",
        "worktree_unresolved",
        "none",
        None,
    )
    assert "primary worktree" in run.error_detail and run.finished_at is not None
    lease = IssueLease.objects.get(issue=issue)
    assert lease.release_reason == ReleaseReason.WORKTREE_UNRESOLVED and lease.released_at
    assert not WorktreeLock.objects.exists()


def test_unresolved_releases_a_lease_the_session_held_before(workspace, make_issue, make_session):
    issue = make_issue(requires_filesystem=True)
    session = make_session()
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)

    with pytest.raises(WorktreeUnresolved):
        dispatch(workspace, session, issue)

    assert unreleased_lease(issue) is None
    assert IssueLease.objects.get().release_reason == ReleaseReason.WORKTREE_UNRESOLVED


def test_busy_worktree_cancels_the_run_names_the_holder_and_keeps_the_lease(
    workspace, make_issue, make_session, tree
):
    holder_session, waiter = make_session("holder"), make_session("waiter")
    first = dispatch(workspace, holder_session, make_issue(worktree=tree))
    issue = make_issue(worktree=tree)

    with pytest.raises(WorktreeBusy) as raised:
        dispatch(workspace, waiter, issue)

    error = raised.value
    assert (error.status, error.code) == (409, "worktree_busy")
    assert error.extra["holder"] == {
        "session": holder_session.pk,
        "agent": "holder",
        "run": first.pk,
    }
    cancelled = Run.objects.get(pk=error.extra["run"])  # recorded although the call failed
    assert (cancelled.status, cancelled.error, cancelled.lock_mode, cancelled.worktree_id) == (
        "cancelled",
        "worktree_busy",
        "exclusive",
        tree.pk,
    )
    assert f"run {first.pk}" in cancelled.error_detail and "holder" in cancelled.error_detail
    assert unreleased_lease(issue).session_id == waiter.pk
    lock = WorktreeLock.objects.get()
    assert (lock.run_id, lock.released_at) == (first.pk, None)


def test_the_same_session_cannot_write_one_worktree_twice(workspace, make_issue, coder):
    first = dispatch(workspace, coder, make_issue(requires_filesystem=True))

    with pytest.raises(WorktreeBusy) as raised:
        dispatch(workspace, coder, make_issue(requires_filesystem=True))

    assert raised.value.extra["holder"]["run"] == first.pk
    assert WorktreeLock.objects.filter(released_at__isnull=True).count() == 1


def test_next_dispatch_after_finish_gets_the_worktree(workspace, make_issue, make_session, tree):
    a, b = make_session("a"), make_session("b")
    first = dispatch(workspace, a, make_issue(worktree=tree))
    issue = make_issue(worktree=tree)
    with pytest.raises(WorktreeBusy):
        dispatch(workspace, b, issue)

    finish(workspace, first)
    retried = dispatch(workspace, b, issue)

    assert retried.status == "running"
    assert WorktreeLock.objects.get(released_at__isnull=True).run_id == retried.pk


def test_dead_holders_lock_is_reclaimed_expired(workspace, make_issue, make_session, tree):
    dead, next_one = make_session("dead"), make_session("next")
    stale = dispatch(workspace, dead, make_issue(worktree=tree))
    expire(dead)

    run = dispatch(workspace, next_one, make_issue(worktree=tree))

    assert run.status == "running"
    old = WorktreeLock.objects.get(run=stale)
    assert (old.release_reason, old.released_at is not None) == (ReleaseReason.EXPIRED, True)
    assert WorktreeLock.objects.get(released_at__isnull=True).run_id == run.pk
    # The crashed session's run is not recorded as an exit; it may still report.
    assert Run.objects.get(pk=stale.pk).status == "running"


def test_sessionless_lock_is_reclaimed_expired(workspace, make_issue, make_session, tree):
    gone = make_session("gone")
    stale = dispatch(workspace, gone, make_issue(worktree=tree))
    AgentSession.objects.filter(pk=gone.pk).delete()  # orphans the lock (SET NULL)

    run = dispatch(workspace, make_session("next"), make_issue(worktree=tree))

    assert run.status == "running"
    assert WorktreeLock.objects.get(run=stale).release_reason == ReleaseReason.EXPIRED


def test_not_live_session_is_refused_and_nothing_recorded(workspace, issue, make_session):
    session = make_session()
    expire(session)

    with pytest.raises(SessionNotLive):
        dispatch(workspace, session, issue)

    assert not Run.objects.exists() and not IssueLease.objects.exists()


def test_ended_session_is_refused(workspace, issue, make_session):
    session = make_session()
    agents.end_session(workspace=workspace, session_id=session.pk)

    with pytest.raises(SessionNotLive):
        dispatch(workspace, session, issue)

    assert not Run.objects.exists()


def test_issue_leased_by_another_live_session_is_lease_held(workspace, issue, make_session):
    holder, other = make_session("holder"), make_session("other")
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=holder.pk)

    with pytest.raises(LeaseHeld) as raised:
        dispatch(workspace, other, issue)

    assert raised.value.extra["holder"] == {"session": holder.pk, "agent": "holder"}
    assert not Run.objects.exists()


def test_wip_cap_refuses_dispatch_and_keeps_its_denial(
    workspace, project, make_issue, make_session
):
    project.agent_wip_limit = 1
    project.save()
    dispatch(workspace, make_session("a"), make_issue())

    with pytest.raises(WipLimitReached) as raised:
        dispatch(workspace, make_session("b"), make_issue())

    assert raised.value.extra["limit"] == 1
    assert WipCapDenial.objects.count() == 1
    assert Run.objects.count() == 1


def test_unknown_issue_is_not_found_and_unknown_session_invalid(workspace, issue, make_session):
    session = make_session()
    with pytest.raises(NotFound):
        dispatch_run(workspace=workspace, session_id=session.pk, issue_id=10**9)
    with pytest.raises(InvalidInput):
        dispatch_run(workspace=workspace, session_id=10**9, issue_id=issue.pk)
    assert not Run.objects.exists()


def test_issue_of_another_workspace_is_not_found(workspace, other_workspace, issue, make_session):
    stranger = make_session("stranger", workspace=other_workspace)
    with pytest.raises(NotFound):
        dispatch_run(workspace=other_workspace, session_id=stranger.pk, issue_id=issue.pk)
    assert not Run.objects.exists() and not IssueLease.objects.exists()


# --- parallelism -----------------------------------------------------------------------


def test_four_cognitive_runs_run_side_by_side_without_locks(
    workspace, project, make_issue, make_session
):
    project.agent_wip_limit = 4
    project.save()
    sessions = [make_session(f"writer-{n}") for n in range(4)]
    issues = [make_issue(requires_filesystem=False) for _ in range(4)]

    runs = [dispatch(workspace, s, i) for s, i in zip(sessions, issues, strict=True)]

    assert [r.status for r in runs] == ["running"] * 4
    assert Run.objects.filter(status="running", lock_mode="none").count() == 4
    assert not WorktreeLock.objects.exists()


# --- finish and end -------------------------------------------------------------------


def test_finish_ends_the_run_and_releases_its_lock(workspace, make_issue, coder):
    run = dispatch(workspace, coder, make_issue(requires_filesystem=True))

    finished = finish(workspace, run, "failed")

    assert (finished.status, finished.finished_at is not None) == ("failed", True)
    lock = WorktreeLock.objects.get()
    assert lock.release_reason == ReleaseReason.RELEASED and lock.released_at is not None
    assert IssueLease.objects.get().released_at is None  # the lease is the agent's to release


def test_finishing_twice_is_run_not_running(workspace, issue, make_session):
    run = dispatch(workspace, make_session(), issue)
    finish(workspace, run)

    with pytest.raises(RunNotRunning):
        finish(workspace, run, "failed")

    assert Run.objects.get().status == "succeeded"


def test_finishing_a_cancelled_run_is_run_not_running(workspace, make_issue, make_session, tree):
    dispatch(workspace, make_session("a"), make_issue(worktree=tree))
    with pytest.raises(WorktreeBusy) as raised:
        dispatch(workspace, make_session("b"), make_issue(worktree=tree))

    with pytest.raises(RunNotRunning):
        finish_run(workspace=workspace, run_id=raised.value.extra["run"], outcome="failed")

    assert Run.objects.get(pk=raised.value.extra["run"]).status == "cancelled"


def test_finish_of_an_unknown_or_foreign_run_is_not_found(
    workspace, other_workspace, issue, make_session
):
    run = dispatch(workspace, make_session(), issue)
    with pytest.raises(NotFound):
        finish_run(workspace=workspace, run_id=10**9, outcome="succeeded")
    with pytest.raises(NotFound):
        finish_run(workspace=other_workspace, run_id=run.pk, outcome="succeeded")
    assert Run.objects.get().status == "running"


def test_finish_refuses_an_outcome_that_is_not_an_end(workspace, issue, make_session):
    run = dispatch(workspace, make_session(), issue)
    with pytest.raises(InvalidInput):
        finish(workspace, run, "cancelled")
    assert Run.objects.get().status == "running"


def test_ending_the_session_releases_its_locks_and_cancels_its_running_runs(
    workspace, make_issue, coder, make_session
):
    locked = dispatch(workspace, coder, make_issue(requires_filesystem=True))
    done = dispatch(workspace, coder, make_issue())
    finish(workspace, done)
    other = dispatch(workspace, make_session("other"), make_issue())

    agents.end_session(workspace=workspace, session_id=coder.pk)

    lock = WorktreeLock.objects.get()
    assert lock.release_reason == ReleaseReason.AGENT_ENDED
    assert Run.objects.get(pk=locked.pk).status == "cancelled"
    assert Run.objects.get(pk=locked.pk).error == ""  # not a dispatch failure
    assert Run.objects.get(pk=done.pk).status == "succeeded"
    assert Run.objects.get(pk=other.pk).status == "running"


# --- fences ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_lock_fences_grow_per_worktree_through_finish_expiry_override_and_end(
    api, workspace, make_issue, make_session, tree, roomy
):
    other_tree = Worktree.objects.create(workspace=workspace, slug="docs", name="Docs")
    a, b, c = make_session("a"), make_session("b"), make_session("c")

    first = post(api, "/runs/", {"session": a.pk, "issue": make_issue(worktree=tree).pk}).json()
    assert first["fence"] == 1
    assert dispatch(workspace, b, make_issue(worktree=other_tree)).pk  # counted per worktree
    post(api, f"/runs/{first['id']}/finish/", {"outcome": "succeeded", "fence": 1})
    second = dispatch(workspace, b, make_issue(worktree=tree))  # after a finish
    expire(b)
    third = dispatch(workspace, c, make_issue(worktree=tree))  # after a stale reclaim
    operators.force_release_worktree_locks(locks=WorktreeLock.objects.all(), operator="op")
    fourth = dispatch(workspace, a, make_issue(worktree=tree))  # after an override
    agents.end_session(workspace=workspace, session_id=a.pk)
    fifth = dispatch(workspace, c, make_issue(worktree=tree))  # after a clean end

    assert [lock_of(run).fence for run in (second, third, fourth, fifth)] == [2, 3, 4, 5]
    assert lock_fences(tree) == [1, 2, 3, 4, 5]
    assert lock_fences(other_tree) == [1]
    runs = {run["id"]: run["fence"] for run in api.get(f"{V1}/runs/").json()["results"]}
    assert runs[first["id"]] == 1 and runs[fifth.pk] == 5
    assert api.get(f"{V1}/runs/{third.pk}/").json()["fence"] == 3
