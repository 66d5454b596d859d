"""File-claim races on PostgreSQL: real threads, each with its own connection and session.

They prove invariant 5 (all-or-nothing) under READ COMMITTED: overlapping all-or-nothing claims
never leave a path held twice nor a request half-claimed, and a claim racing a release
(closing an issue, ending a session) neither deadlocks nor errors.
"""

import random
import time

import pytest

from coordination.errors import FileConflict, InvalidTransition, SessionNotLive, StaleFence
from coordination.liveness import DbNow
from coordination.models import (
    AgentSession,
    ClaimConflict,
    FileClaim,
    Issue,
    IssueLease,
    ReleaseReason,
)
from coordination.services import agents, events, file_claims, work, workflow
from coordination.services.common import release_unreleased
from tests.conftest import expire
from tests.coordination.conftest import claim_lease, lease_fences
from tests.coordination.races.conftest import FENCE_ROUNDS, hold_and_race, run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 32
POOL = [f"src/module_{n:02d}.py" for n in range(40)]
SET_SIZE = 10


def claim(workspace, issue_id, session_id, paths, force=False):
    return file_claims.claim_files(
        workspace=workspace, issue_id=issue_id, paths=paths, session_id=session_id, force=force
    )


def fresh_issues(project, count, round_number):
    return Issue.objects.bulk_create(
        Issue(workspace=project.workspace, project=project, title=f"r{round_number}-{n}")
        for n in range(count)
    )


def keep_alive():
    AgentSession.objects.filter(status="active").update(last_heartbeat_at=DbNow())


def release_everything():
    release_unreleased(FileClaim.objects.all(), ReleaseReason.RELEASED)


def assert_no_path_held_twice():
    held = FileClaim.objects.filter(released_at__isnull=True)
    assert held.count() == len(set(held.values_list("path", flat=True)))


def test_overlapping_claims_are_all_or_nothing_and_never_double_held(
    workspace, project, make_session
):
    rng = random.Random(5)
    sessions = [make_session(f"agent-{n}") for n in range(THREADS)]
    accepted_total = rejected_total = 0
    for round_number in range(50):
        keep_alive()
        issues = fresh_issues(project, THREADS, round_number)
        requests = [rng.sample(POOL, SET_SIZE) for _ in range(THREADS)]

        results = run_in_threads(
            claim,
            [
                (workspace, i.pk, s.pk, p)
                for i, s, p in zip(issues, sessions, requests, strict=True)
            ],
        )

        unexpected = [
            r for r in results if isinstance(r, Exception) and not isinstance(r, FileConflict)
        ]
        assert unexpected == [], f"round {round_number}: {unexpected}"
        accepted = [n for n, r in enumerate(results) if not isinstance(r, Exception)]
        rejected = [n for n, r in enumerate(results) if isinstance(r, FileConflict)]
        assert accepted, f"round {round_number}: the first committer cannot be refused"
        winners = {issues[n].pk for n in accepted}
        held = dict(FileClaim.objects.filter(released_at__isnull=True).values_list("path", "issue"))
        assert_no_path_held_twice()
        for n in accepted:
            # Complete: every requested path, and only those, is held by this issue.
            mine = {path for path, issue_id in held.items() if issue_id == issues[n].pk}
            assert mine == set(requests[n]), f"round {round_number}"
            assert sorted(c.path for c in results[n].claims) == sorted(requests[n])
        assert len(held) == SET_SIZE * len(accepted)
        for n in rejected:
            # Nothing claimed, not even briefly committed, and every holder it named
            # is a winner of this round that holds the path still.
            assert not FileClaim.objects.filter(issue=issues[n]).exists()
            conflicts = results[n].extra["conflicts"]
            assert conflicts and {c["path"] for c in conflicts} <= set(requests[n])
            assert all(held[c["path"]] == c["issue"] and c["issue"] in winners for c in conflicts)
            logged = ClaimConflict.objects.filter(rejected_issue=issues[n], forced=False)
            assert sorted(logged.values_list("path", flat=True)) == sorted(
                c["path"] for c in conflicts
            )
        assert not ClaimConflict.objects.filter(rejected_issue__in=winners).exists()
        accepted_total += len(accepted)
        rejected_total += len(rejected)
        release_everything()
    assert accepted_total + rejected_total == 50 * THREADS
    assert rejected_total > 0, "the sets overlap: some requests must have been refused"


def test_concurrent_forced_claims_each_claim_a_complete_set(workspace, project, make_session):
    rng = random.Random(7)
    sessions = [make_session(f"forcer-{n}") for n in range(16)]
    for round_number in range(10):
        keep_alive()
        issues = fresh_issues(project, len(sessions), round_number)
        requests = [rng.sample(POOL, SET_SIZE) for _ in sessions]

        results = run_in_threads(
            claim,
            [
                (workspace, i.pk, s.pk, p, True)
                for i, s, p in zip(issues, sessions, requests, strict=True)
            ],
        )

        assert [r for r in results if isinstance(r, Exception)] == []
        assert_no_path_held_twice()
        for issue, paths in zip(issues, requests, strict=True):
            assert sorted(FileClaim.objects.filter(issue=issue).values_list("path", flat=True)) == (
                sorted(paths)
            )
        held = dict(FileClaim.objects.filter(released_at__isnull=True).values_list("path", "issue"))
        assert set(held) == set().union(*requests)
        requesters = {
            path: {i.pk for i, p in zip(issues, requests, strict=True) if path in p}
            for path in held
        }
        assert all(held[path] in requesters[path] for path in held)
        overridden = sum(len(r.overridden) for r in results)
        round_rows = FileClaim.objects.filter(issue__in=issues)
        assert round_rows.filter(release_reason=ReleaseReason.OVERRIDDEN).count() == overridden
        assert ClaimConflict.objects.filter(rejected_issue__in=issues, forced=True).count() == (
            overridden
        )
        release_everything()


def test_claims_racing_closes_and_session_ends_neither_deadlock_nor_error(
    workspace, project, make_session
):
    """Closing an issue locks the issue, then its claims; a claimer must not hold a
    claim row while waiting for that issue, or PostgreSQL would abort one of them."""
    rng = random.Random(11)
    for round_number in range(10):
        holders = [make_session(f"holder-{round_number}-{n}") for n in range(8)]
        claimers = [make_session(f"claimer-{round_number}-{n}") for n in range(16)]
        held_issues = fresh_issues(project, len(holders), round_number)
        for n, (issue, session) in enumerate(zip(held_issues, holders, strict=True)):
            claim(workspace, issue.pk, session.pk, POOL[n * 5 : n * 5 + 5])
        claim_issues = fresh_issues(project, len(claimers), round_number)

        def close(issue_id):
            return workflow.transition_issue(
                workspace=workspace, issue_id=issue_id, to="cancelled", by_human=False
            )

        def end(session_id):
            return agents.end_session(workspace=workspace, session_id=session_id)

        def work(kind, *args):
            return {"close": close, "end": end, "claim": claim}[kind](*args)

        jobs = [("close", i.pk) for i in held_issues[:4]]
        jobs += [("end", s.pk) for s in holders[4:]]
        jobs += [
            ("claim", workspace, i.pk, s.pk, rng.sample(POOL, SET_SIZE), n % 2 == 0)
            for n, (i, s) in enumerate(zip(claim_issues, claimers, strict=True))
        ]
        rng.shuffle(jobs)

        results = run_in_threads(work, jobs)

        errors = [r for r in results if isinstance(r, Exception)]
        assert [e for e in errors if not isinstance(e, FileConflict | SessionNotLive)] == []
        assert_no_path_held_twice()
        closed_or_ended = FileClaim.objects.filter(released_at__isnull=True).filter(
            issue__in=held_issues[:4]
        ) | FileClaim.objects.filter(released_at__isnull=True, session__in=holders[4:])
        assert not closed_or_ended.exists()
        release_everything()


def test_a_claim_racing_the_close_of_its_own_issue_never_outlives_it(
    workspace, project, make_session
):
    """Closing releases the issue's claims; a claim admitted while the close commits
    would be missed by that release and hold its paths until forced."""

    def close(issue_id):
        return workflow.transition_issue(
            workspace=workspace, issue_id=issue_id, to="cancelled", by_human=False
        )

    def work(kind, *args):
        return close(*args) if kind == "close" else claim(*args)

    for round_number in range(20):
        issues = fresh_issues(project, 8, round_number)
        sessions = [make_session(f"c-{round_number}-{n}") for n in range(8)]
        jobs = [("close", issue.pk) for issue in issues]
        jobs += [
            ("claim", workspace, issue.pk, session.pk, POOL[n * 5 : n * 5 + 5])
            for n, (issue, session) in enumerate(zip(issues, sessions, strict=True))
        ]

        results = run_in_threads(work, jobs)

        errors = [r for r in results if isinstance(r, Exception)]
        assert [e for e in errors if not isinstance(e, InvalidTransition)] == []
        assert not FileClaim.objects.filter(
            released_at__isnull=True, issue__status="cancelled"
        ).exists(), f"round {round_number}"
        release_everything()


# --- fences ---------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_fenced_file_claim_racing_a_start_work_on_the_same_paths(
    workspace, issue, make_session, roomy
):
    """The old holder (expired) claims paths with its fence, no session, while another
    agent starts work on the (todo) issue with the same paths: it reclaims the lease,
    claims the paths and moves the issue on. Either the fenced claim lands first (and
    start_work, of the same issue, keeps those claims), or the reclaim does (and the
    claim is refused ``stale_fence``); never a deadlock."""
    paths = ["src/a.py", "src/b.py"]

    def act(kind, fence=None, agent=None):
        if kind == "claim":
            time.sleep(random.uniform(0, 0.03))  # start_work registers a session first
            return file_claims.claim_files(
                workspace=workspace, issue_id=issue.pk, paths=paths, fence=fence
            )
        return work.start_work(
            workspace=workspace, agent_name=agent, issue_id=issue.pk, paths=paths
        )

    outcomes = []
    for round_number in range(FENCE_ROUNDS):
        Issue.objects.filter(pk=issue.pk).update(status=Issue.Status.TODO)
        old = make_session(f"old-{round_number}")
        lease = claim_lease(workspace, issue, old)
        expire(old)

        claimed, started = run_in_threads(
            act, [("claim", lease.fence), ("start", None, f"new-{round_number}")]
        )

        assert isinstance(started, work.Started), (round_number, started)
        assert started.lease.fence > lease.fence
        held = FileClaim.objects.filter(issue=issue, released_at__isnull=True)
        if isinstance(claimed, StaleFence):
            outcomes.append("reclaimed")
            assert {claim.session_id for claim in held} == {started.session.pk}
        else:
            outcomes.append("claimed")
            assert isinstance(claimed, file_claims.ClaimedFiles), (round_number, claimed)
            assert {claim.session_id for claim in held} == {None}  # kept by start_work
        assert held.count() == len(paths)
        assert IssueLease.objects.unreleased().get(issue=issue).pk == started.lease.pk
        # Clear the field for the next round (a release announces itself: in a change).
        with events.change():
            file_claims.release_issue_claims(issue=issue, reason=ReleaseReason.RELEASED)
        agents.end_session(workspace=workspace, session_id=started.session.pk)

    assert lease_fences(issue) == list(range(1, 2 * FENCE_ROUNDS + 1))
    print("outcomes:", {kind: outcomes.count(kind) for kind in set(outcomes)})


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_fenced_file_claim_meeting_a_close_in_progress_waits_and_is_refused(
    workspace, issue, make_session
):
    """A close holds the issue, then releases its lease; a fenced claim holds the
    lease, then needs the issue. The claim must not wait for the issue while holding
    the lease (a cycle): it backs off, waits for the close alone, and is refused."""
    holder = make_session()
    lease = claim_lease(workspace, issue, holder)

    def close(let_claim_in):
        Issue.objects.select_for_update(no_key=True).get(pk=issue.pk)
        let_claim_in()  # the claim arrives while the issue is locked
        workflow.transition_issue(
            workspace=workspace, issue_id=issue.pk, to="cancelled", by_human=False
        )

    def claim_with_fence():
        return file_claims.claim_files(
            workspace=workspace,
            issue_id=issue.pk,
            paths=["src/a.py"],
            session_id=holder.pk,
            fence=lease.fence,
        )

    closed, claimed = hold_and_race(close, claim_with_fence)
    assert closed is None, closed
    assert isinstance(claimed, StaleFence), claimed
    assert claimed.extra["current_fence"] is None
    lease.refresh_from_db()
    assert lease.release_reason == ReleaseReason.ISSUE_CLOSED
    assert not FileClaim.objects.exists()
