"""Races on PostgreSQL: real threads, each with its own connection and live session.

These prove invariants 2 (one live lease per issue), 3 (the WIP cap) and 4 (stale reclaim) under
READ COMMITTED, where a check-then-insert that is not serialised per project would let several
claimers in at once.
"""

import pytest

from coordination.errors import (
    FileConflict,
    InvalidTransition,
    LeaseHeld,
    StaleFence,
    WipLimitReached,
)
from coordination.models import IssueLease, Project, ReleaseReason, WipCapDenial
from coordination.services import agents, file_claims, leases, locking, work, workflow
from tests.conftest import expire
from tests.coordination.conftest import claim_lease, lease_fences
from tests.coordination.races.conftest import FENCE_ROUNDS, hold_and_race, run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 64


def claim(workspace, issue_id, session_id):
    return leases.claim_issue(workspace=workspace, issue_id=issue_id, session_id=session_id)


def test_64_claimers_of_one_issue_get_exactly_one_lease(workspace, issue, make_session):
    sessions = [make_session(f"agent-{n}") for n in range(THREADS)]

    results = run_in_threads(claim, [(workspace, issue.pk, s.pk) for s in sessions])

    winners = [r for r in results if not isinstance(r, Exception)]
    refusals = [r for r in results if isinstance(r, LeaseHeld)]
    assert len(winners) == 1 and len(refusals) == THREADS - 1, results
    holder = winners[0].lease
    assert {r.extra["holder"]["session"] for r in refusals} == {holder.session_id}
    assert IssueLease.objects.filter(issue=issue).count() == 1


def test_wip_cap_holds_under_64_concurrent_claims_20_times(workspace, make_issue, make_session):
    sessions = [make_session(f"agent-{n}") for n in range(THREADS)]
    for round_number in range(20):
        for session in sessions:  # as a live fleet does: the rounds may outlast the TTL
            agents.heartbeat_session(workspace=workspace, session_id=session.pk)
        project = Project.objects.create(
            workspace=workspace, key=f"p{round_number}", name="Race", agent_wip_limit=3
        )
        issues = [make_issue(project=project) for _ in range(THREADS)]

        results = run_in_threads(
            claim, [(workspace, i.pk, s.pk) for i, s in zip(issues, sessions, strict=True)]
        )

        denied = [r for r in results if isinstance(r, WipLimitReached)]
        others = [r for r in results if isinstance(r, Exception) and r not in denied]
        assert others == [], others
        assert len(denied) == THREADS - 3, f"round {round_number}"
        assert IssueLease.objects.live().filter(issue__project=project).count() == 3
        assert WipCapDenial.objects.filter(project=project).count() == THREADS - 3


def test_two_claimers_race_to_reclaim_a_dead_holders_lease(workspace, issue, make_session):
    for _ in range(10):
        dead = make_session("dead")
        old = claim(workspace, issue.pk, dead.pk).lease
        expire(dead)
        a, b = make_session("a"), make_session("b")

        results = run_in_threads(claim, [(workspace, issue.pk, a.pk), (workspace, issue.pk, b.pk)])

        winners = [r for r in results if not isinstance(r, Exception)]
        assert len(winners) == 1, results
        assert isinstance(next(r for r in results if r not in winners), LeaseHeld)
        old.refresh_from_db()
        assert old.release_reason == ReleaseReason.EXPIRED
        assert (
            IssueLease.objects.filter(
                issue=issue, release_reason=ReleaseReason.EXPIRED, session=dead
            ).count()
            == 1
        )
        # Clear the field for the next repetition.
        IssueLease.objects.filter(issue=issue, released_at__isnull=True).update(
            released_at=old.released_at, release_reason=ReleaseReason.RELEASED
        )


def test_a_claim_racing_the_close_of_its_issue_never_outlives_it(
    workspace, project, make_issue, make_session
):
    """Closing releases the lease; a lease admitted while the close commits would be
    missed by that release and keep a closed issue leased."""
    project.agent_wip_limit = 100
    project.save()

    def close(issue_id):
        return workflow.transition_issue(
            workspace=workspace, issue_id=issue_id, to="cancelled", by_human=False
        )

    def work(kind, issue_id, session_id=None):
        return close(issue_id) if kind == "close" else claim(workspace, issue_id, session_id)

    for round_number in range(20):
        issues = [make_issue() for _ in range(8)]
        sessions = [make_session(f"c-{round_number}-{n}") for n in range(8)]
        jobs = [("close", issue.pk) for issue in issues]
        jobs += [("claim", i.pk, s.pk) for i, s in zip(issues, sessions, strict=True)]

        results = run_in_threads(work, jobs)

        errors = [r for r in results if isinstance(r, Exception)]
        assert [e for e in errors if not isinstance(e, InvalidTransition)] == []
        assert not IssueLease.objects.unreleased().filter(issue__status="cancelled").exists(), (
            f"round {round_number}"
        )


# --- fences ---------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_lost_holders_release_racing_the_reclaim_has_exactly_one_winner(
    workspace, issue, make_session, roomy
):
    """Each round: the old holder (expired) releases with its fence while a new session
    claims. Either the release lands first (and the claim takes a fresh lease), or the
    reclaim does (and the release is refused ``stale_fence``); never both, never
    neither, never a claim refused as held by the dead."""

    def act(kind, session_id, fence=None):
        if kind == "release":
            return leases.release_issue(
                workspace=workspace, issue_id=issue.pk, session_id=session_id, fence=fence
            )
        return leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session_id)

    outcomes = []
    for round_number in range(FENCE_ROUNDS):
        old = make_session(f"old-{round_number}")
        lease = claim_lease(workspace, issue, old)
        expire(old)
        new = make_session(f"new-{round_number}")

        released, claimed = run_in_threads(
            act, [("release", old.pk, lease.fence), ("claim", new.pk)]
        )

        assert not isinstance(claimed, Exception), (round_number, claimed)
        assert claimed.created and claimed.lease.fence > lease.fence
        lease.refresh_from_db()
        if isinstance(released, StaleFence):
            outcomes.append("reclaimed")
            assert lease.release_reason == ReleaseReason.EXPIRED
            assert released.extra["current_fence"] == claimed.lease.fence
        else:
            outcomes.append("released")
            assert isinstance(released, IssueLease), (round_number, released)
            assert lease.release_reason == ReleaseReason.RELEASED and released.fence == lease.fence
        unreleased = IssueLease.objects.unreleased().filter(issue=issue)
        assert list(unreleased.values_list("pk", flat=True)) == [claimed.lease.pk]
        leases.release_issue(
            workspace=workspace, issue_id=issue.pk, session_id=new.pk, fence=claimed.lease.fence
        )

    assert lease_fences(issue) == list(range(1, 2 * FENCE_ROUNDS + 1))
    print("outcomes:", {kind: outcomes.count(kind) for kind in set(outcomes)})


def test_start_work_assigns_after_its_file_claims_so_a_file_claimer_cannot_deadlock_it(
    workspace, make_issue, make_session, monkeypatch
):
    """A file claimer takes its path's lock, then shares the issues holding the path.
    start_work holds its issue's share from its lease claim on and asks for the path's
    lock next: had its lease claim locked the issue for the assignee, the claimer
    would wait for the issue holding the path, and start_work for the path."""
    issue, rival = make_issue(status="todo"), make_issue(title="Rival")
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["src/a.py"], session_id=make_session().pk
    )
    rival_session = make_session("rival")
    lock_paths_and_issues = locking.lock_paths_and_issues
    gate = []

    def pausing(**kwargs):
        if kwargs["issue_id"] == issue.pk and gate:
            gate.pop()()  # the rival claims while start_work holds the lease, not the path
        return lock_paths_and_issues(**kwargs)

    monkeypatch.setattr(locking, "lock_paths_and_issues", pausing)

    def start(let_racer_in):
        gate.append(let_racer_in)
        return work.start_work(
            workspace=workspace, agent_name="erin", issue_id=issue.pk, paths=["src/a.py"]
        )

    def claim_the_path():
        return file_claims.claim_files(
            workspace=workspace, issue_id=rival.pk, paths=["src/a.py"], session_id=rival_session.pk
        )

    started, refused = hold_and_race(start, claim_the_path)
    assert isinstance(started, work.Started), started
    assert isinstance(refused, FileConflict), refused  # the issue's earlier claim holds it
    issue.refresh_from_db()
    assert (issue.status, issue.assignee.name) == ("in_progress", "erin")


def test_a_lease_released_between_the_claims_insert_and_its_read_is_taken(
    workspace, issue, make_session, roomy, monkeypatch
):
    """The claim's insert meets the holder's lease; the holder releases it and commits
    (a release takes no project lock) before the claim reads who holds the issue. The
    issue is free then: the claim takes it, rather than report the WIP cap."""
    holder, claimer = make_session("holder"), make_session("claimer")
    held = claim_lease(workspace, issue, holder)
    read = leases.unreleased_lease
    released = []

    def read_after_the_release(issue_id):
        if not released:
            [result] = run_in_threads(
                lambda: leases.release_issue(
                    workspace=workspace, issue_id=issue_id, session_id=holder.pk, fence=held.fence
                ),
                [()],
            )
            released.append(result)
        return read(issue_id)

    monkeypatch.setattr(leases, "unreleased_lease", read_after_the_release)
    claimed = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=claimer.pk)
    assert isinstance(released[0], IssueLease)  # the release went through first
    assert claimed.created and claimed.lease.session_id == claimer.pk
    assert claimed.lease.fence == held.fence + 1
    assert not WipCapDenial.objects.exists()


def test_a_takeover_races_claimers_of_its_dead_predecessors_paths(
    workspace, make_issue, make_session, roomy
):
    """A start_work taking over a dead session's issue releases that session's claims
    on it while other issues' claimers reclaim the same paths: no deadlock, each dead
    claim released ``expired`` once, by one of them."""
    for round_number in range(10):
        issue, one, two = make_issue(), make_issue(), make_issue()
        paths = [f"r{round_number}/{name}" for name in ("a.py", "b.py", "c/")]
        dead = work.start_work(
            workspace=workspace, agent_name="dead", issue_id=issue.pk, paths=paths
        ).session
        expire(dead)
        one_claimer, two_claimer = make_session("one"), make_session("two")

        def take_over(issue, path):
            return work.start_work(
                workspace=workspace, agent_name="taker", issue_id=issue.pk, paths=[path]
            )

        def claim_for(other, session, path):
            return file_claims.claim_files(
                workspace=workspace, issue_id=other.pk, paths=[path], session_id=session.pk
            )

        results = run_in_threads(
            lambda target, *args: target(*args),
            [
                (take_over, issue, paths[1]),
                (claim_for, one, one_claimer, paths[0]),
                (claim_for, two, two_claimer, f"{paths[2]}d.py"),
            ],
        )

        assert not [r for r in results if isinstance(r, Exception)], results
        released = dead.file_claims.filter(released_at__isnull=False)
        assert sorted(released.values_list("path", "release_reason")) == [
            (path, ReleaseReason.EXPIRED) for path in sorted(paths)
        ]
        issue.refresh_from_db()
        assert issue.assignee.name == "taker"
