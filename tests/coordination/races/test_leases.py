"""Races on PostgreSQL: real threads, each with its own connection and live session.

These prove invariants 2-4 under READ COMMITTED, where a check-then-insert that is
not serialised per project would let several claimers in at once.
"""

import pytest

from coordination.errors import InvalidTransition, LeaseHeld, WipLimitReached
from coordination.models import IssueLease, Project, ReleaseReason, WipCapDenial
from coordination.services import leases, workflow
from tests.conftest import expire, run_in_threads

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
