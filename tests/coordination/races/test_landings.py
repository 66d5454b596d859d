"""Races for the landing queue, on both databases: real threads, each with its own
connection (invariant 21 (the default branch is always green)).

Every take is made under the project's row lock (PostgreSQL) or SQLite's single writer:
of many testers racing for the head batch, exactly one gets it, and no entry is ever in
two batches; of many queues of one issue, exactly one entry is made.
"""

import pytest

from coordination.errors import LandingExists
from coordination.models import Landing
from coordination.services import agents, file_claims, landings, leases
from tests.coordination.races.conftest import run_in_threads

pytestmark = pytest.mark.django_db(transaction=True)

TESTERS = 16
ROUNDS = 3
ENTRIES = 4


def take(workspace, session_id):
    return landings.take_batch(
        workspace=workspace, project_key="core", session_id=session_id, max_entries=ENTRIES
    )


def test_16_testers_racing_for_the_head_batch_one_takes_it_and_no_entry_twice(
    workspace, project, make_issue, make_session
):
    project.agent_wip_limit = ENTRIES * ROUNDS
    project.save()
    coder = make_session("coder")
    testers = [make_session(f"tester-{n}") for n in range(TESTERS)]
    for round_number in range(ROUNDS):
        for session in [coder, *testers]:  # a live fleet: the rounds may outlast the TTL
            agents.heartbeat_session(workspace=workspace, session_id=session.pk)
        queued = []
        for n in range(ENTRIES):
            issue = make_issue(title=f"round {round_number}, issue {n}")
            lease = leases.claim_issue(
                workspace=workspace, issue_id=issue.pk, session_id=coder.pk
            ).lease
            file_claims.claim_files(
                workspace=workspace,
                issue_id=issue.pk,
                paths=[f"src/r{round_number}/{n}.py"],
                session_id=coder.pk,
            )
            entry = landings.queue_landing(
                workspace=workspace,
                issue_id=issue.pk,
                session_id=coder.pk,
                branch=f"b{issue.pk}",
                commit="abcdef1",
                fence=lease.fence,
            )
            queued.append(entry.pk)

        results = run_in_threads(take, [(workspace, t.pk) for t in testers])

        errors = [r for r in results if isinstance(r, Exception)]
        assert not errors, errors
        winners = [r for r in results if r.entries]
        assert len(winners) == 1, results
        batch = winners[0]
        assert [entry.pk for entry in batch.entries] == queued
        losers = [r for r in results if not r.entries]
        # Each one came after the winner's commit, and was told whose batch it is.
        assert all(r.busy is not None and r.busy["fence"] == batch.fence for r in losers)
        tester = batch.entries[0].tester_id
        states = Landing.objects.filter(pk__in=queued).values_list("state", "tester", "fence")
        assert set(states) == {("testing", tester, batch.fence)}
        for entry in batch.entries:
            landings.land(
                workspace=workspace,
                landing_id=entry.pk,
                session_id=tester,
                fence=batch.fence,
                commit="fedcba9",
            )
    fences = sorted(set(Landing.objects.values_list("fence", flat=True)))
    assert fences == list(range(1, ROUNDS + 1))


def test_racing_queues_of_one_issue_make_exactly_one_entry(workspace, issue, make_session):
    coder = make_session("coder")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=coder.pk).lease

    def queue(n):
        return landings.queue_landing(
            workspace=workspace,
            issue_id=issue.pk,
            session_id=coder.pk,
            branch=f"try-{n}",
            commit="abcdef1",
            fence=lease.fence,
        )

    results = run_in_threads(queue, [(n,) for n in range(TESTERS)])

    made = [r for r in results if isinstance(r, Landing)]
    refused = [r for r in results if isinstance(r, LandingExists)]
    assert len(made) == 1 and len(refused) == TESTERS - 1, results
    assert {r.extra["landing"] for r in refused} <= {made[0].pk, None}
    assert Landing.objects.count() == 1
