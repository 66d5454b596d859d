"""The seed's live sessions, carried on by the fleet (``demo.fleet.seeded``): they
heartbeat and make progress through the API, so they never show stalled, then hand
their issues in and end, as real agents would. Every wait is on a condition."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from coordination.liveness import live_q, stalled_q
from coordination.models import AgentSession, Issue, IssueLease, Run, Workspace
from demo import access, world
from demo.fleet.context import FleetConfig, FleetContext
from demo.fleet.plan import Pacing
from demo.fleet.seeded import SeededWork
from tests.demo.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

STALL_AFTER = 3  # seconds: progress is reported every second


def test_the_seeds_live_sessions_make_progress_then_hand_their_work_in(live_server, settings):
    settings.PROJEKTOR_STALL_AFTER_SECONDS = STALL_AFTER
    call_command("seed_demo", "--agents", "4", "--days", "1", stdout=StringIO())
    workspace = Workspace.objects.get(slug=world.SLUG)
    held = dict(
        IssueLease.objects.filter(
            workspace=workspace, released_at__isnull=True, session__in=live_sessions()
        ).values_list("session_id", "issue_id")
    )
    assert held, "the seed leaves live sessions holding issues"
    running = list(
        Run.objects.filter(session__in=held, status="running").values_list("pk", flat=True)
    )
    config = FleetConfig(
        url=live_server.url,
        key=access.fresh_key(workspace, access.FLEET_KEY_NAME),
        reviewer="",
        reviewer_password="",
        place=None,  # type: ignore[arg-type]  # the seeded work touches no repository
        pacing=Pacing(seconds=(STALL_AFTER + 2, STALL_AFTER + 3), stall_after=STALL_AFTER),
    )
    context = FleetContext(config, plan=None)  # type: ignore[arg-type]
    seeded = SeededWork(context, seed=1)

    assert seeded.take_over() == live_sessions().count()
    seeded.thread.start()
    stalled: set[int] = set()
    try:

        def handed_in() -> bool:
            stalled.update(live_sessions().filter(stalled_q()).values_list("pk", flat=True))
            return not live_sessions().filter(pk__in=held).exists()

        wait_until(handed_in, "the seeded sessions to hand their work in")
    finally:
        context.stop.set()
        seeded.thread.join(30)

    assert stalled == set()  # past the stall threshold, still making progress
    sessions = AgentSession.objects.filter(pk__in=held)
    assert {s.status for s in sessions} == {"ended"}
    assert all(s.last_progress_at > s.started_at for s in sessions)
    issues = Issue.objects.filter(pk__in=held.values())
    assert {issue.status for issue in issues} == {Issue.Status.IN_REVIEW}
    assert all(issue.report and issue.report["summary"] for issue in issues)
    # The runs they had going finished, as a runner finishes them, not cancelled.
    assert {run.status for run in Run.objects.filter(pk__in=running)} <= {"succeeded"}
    assert context.record.counts["seeded handed in"] == len(held)
    assert not context.tally.server_errors()


def live_sessions():
    return AgentSession.objects.filter(live_q())
