"""The age cap under concurrency on PostgreSQL (invariant 17 (stalled is derived)): many claimers
reclaiming one aged-out lease at once, exactly one wins and the old lease is released once,
``max_age``; a project whose leases aged out admits new claims up to its WIP cap and
never past it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.errors import LeaseHeld, WipLimitReached
from coordination.models import Event, IssueLease, Project, ReleaseReason
from coordination.services import agents, leases
from tests.coordination.races.conftest import run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 32


def claim(workspace, issue_id, session_id):
    return leases.claim_issue(workspace=workspace, issue_id=issue_id, session_id=session_id)


def age_out(lease_ids) -> None:
    IssueLease.objects.filter(pk__in=lease_ids).update(
        ages_out_at=timezone.now() - timedelta(seconds=1)
    )


def test_many_claimers_of_an_aged_out_lease_exactly_one_wins(
    workspace, project, make_issue, make_session
):
    Project.objects.filter(pk=project.pk).update(max_lease_age_seconds=3600, agent_wip_limit=1000)
    sessions = [make_session(f"agent-{n}") for n in range(THREADS)]
    holder = make_session("holder")
    for round_number in range(5):
        for session in [*sessions, holder]:
            agents.heartbeat_session(workspace=workspace, session_id=session.pk)
        issue = make_issue(title=f"round {round_number}")
        old = claim(workspace, issue.pk, holder.pk).lease
        age_out([old.pk])

        results = run_in_threads(claim, [(workspace, issue.pk, s.pk) for s in sessions])

        winners = [r for r in results if not isinstance(r, Exception)]
        refused = [r for r in results if isinstance(r, LeaseHeld)]
        assert len(winners) == 1 and len(refused) == THREADS - 1, results
        assert {r.extra["holder"]["session"] for r in refused} == {winners[0].lease.session_id}
        old.refresh_from_db()
        assert old.release_reason == ReleaseReason.MAX_AGE
        assert winners[0].lease.fence == 2
        released = Event.objects.filter(type="lease.released", data__lease=old.pk)
        assert [e.data["reason"] for e in released] == ["max_age"]


def test_the_wip_cap_holds_past_aged_out_leases(workspace, make_issue, make_session):
    sessions = [make_session(f"agent-{n}") for n in range(THREADS)]
    holders = [make_session(f"holder-{n}") for n in range(3)]
    for round_number in range(5):
        for session in [*sessions, *holders]:
            agents.heartbeat_session(workspace=workspace, session_id=session.pk)
        project = Project.objects.create(
            workspace=workspace,
            key=f"p{round_number}",
            name="Race",
            agent_wip_limit=3,
            max_lease_age_seconds=3600,
        )
        held = [make_issue(project=project) for _ in holders]
        old = [claim(workspace, i.pk, h.pk).lease for i, h in zip(held, holders, strict=True)]
        age_out([lease.pk for lease in old])
        issues = [make_issue(project=project) for _ in sessions]

        results = run_in_threads(
            claim, [(workspace, i.pk, s.pk) for i, s in zip(issues, sessions, strict=True)]
        )

        denied = [r for r in results if isinstance(r, WipLimitReached)]
        others = [r for r in results if isinstance(r, Exception) and r not in denied]
        assert others == [], others
        assert len(denied) == THREADS - 3, f"round {round_number}"
        assert IssueLease.objects.live().filter(issue__project=project).count() == 3
        # The aged-out leases are held still (nobody claimed their issues) but not live.
        assert IssueLease.objects.unreleased().filter(issue__project=project).count() == 6
