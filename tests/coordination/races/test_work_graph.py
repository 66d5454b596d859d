"""Races on PostgreSQL: the work graph never closes a cycle (invariant 16 (the work graph)), and two
blockers closing at once announce their issue's unblocking exactly once."""

import pytest

from coordination.models import Event, EventType, Issue, IssueLink
from coordination.services import graph, workflow
from tests.coordination.races.conftest import run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROUNDS = 30


def link(workspace, source_id, target_id):
    return graph.link_issues(
        workspace=workspace, source_id=source_id, type="blocks", target_id=target_id
    )


def test_two_links_that_would_close_a_cycle_together_never_both_win(workspace, make_issue):
    for round_number in range(ROUNDS):
        a, b = make_issue(title=f"a{round_number}"), make_issue(title=f"b{round_number}")

        results = run_in_threads(link, [(workspace, a.pk, b.pk), (workspace, b.pk, a.pk)])

        won = [r for r in results if isinstance(r, graph.Linked)]
        refused = [r for r in results if isinstance(r, graph.DependencyCycle)]
        assert len(won) == 1 and len(refused) == 1, results
        assert IssueLink.objects.filter(source__in=[a, b]).count() == 1


def test_many_writers_closing_a_ring_leave_it_open(workspace, make_issue):
    """Eight issues, each thread linking one to the next around the ring, with its
    last link among them: at most seven can win, so no cycle closes."""
    for round_number in range(ROUNDS // 3):
        ring = [make_issue(title=f"r{round_number}-{n}") for n in range(8)]
        pairs = [(workspace, ring[n].pk, ring[(n + 1) % 8].pk) for n in range(8)]

        results = run_in_threads(link, pairs)

        assert sum(isinstance(r, graph.Linked) for r in results) == 7, results
        assert sum(isinstance(r, graph.DependencyCycle) for r in results) == 1, results


def test_two_blockers_closing_at_once_unblock_their_issue_once(workspace, make_issue):
    for round_number in range(ROUNDS):
        first, second = make_issue(title="first"), make_issue(title="second")
        blocked = make_issue(title=f"blocked {round_number}")
        link(workspace, first.pk, blocked.pk)
        link(workspace, second.pk, blocked.pk)

        def close(issue_id):
            return workflow.transition_issue(
                workspace=workspace, issue_id=issue_id, to=Issue.Status.CANCELLED, by_human=True
            )

        results = run_in_threads(close, [(first.pk,), (second.pk,)])

        assert all(isinstance(r, Issue) for r in results), results
        unblocked = Event.objects.filter(type=EventType.ISSUE_UNBLOCKED, issue=blocked)
        assert unblocked.count() == 1
        assert unblocked.get().data["resolved_by"] in (first.pk, second.pk)
