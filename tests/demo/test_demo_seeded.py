"""The seed's live sessions, carried on by the fleet (``demo.fleet.seeded``): they
heartbeat and make progress through the API, so they never show stalled, then hand
their issues in and end, as real agents would. Every wait is on a condition."""

from __future__ import annotations

import threading
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from coordination.liveness import live_q, stalled_q
from coordination.models import AgentSession, Issue, IssueLease, Run, Workspace
from demo import access, world
from demo.fleet import place
from demo.fleet.context import FleetConfig, FleetContext
from demo.fleet.fleet import Fleet
from demo.fleet.plan import DemoPlan, Pacing
from demo.fleet.seeded import SeededWork
from tests.demo.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

STALL_AFTER = 15  # seconds: progress is reported every 5 s, so a busy machine has slack


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


def test_the_fleet_carries_the_seeds_live_sessions_on_from_its_start(live_server, tmp_path):
    """``Fleet.run`` (no runners: the seeded work alone) takes the seed's live sessions
    over as it starts, so each makes progress, and ends them when it stops."""
    call_command("seed_demo", "--agents", "4", "--days", "1", stdout=StringIO())
    workspace = Workspace.objects.get(slug=world.SLUG)
    seeded = set(live_sessions().values_list("pk", flat=True))
    assert seeded, "the seed leaves live sessions"
    home = place.Place(Path(tmp_path) / "demo")
    home.repo.mkdir(parents=True)
    place.git(home.repo, "init", "-q", "-b", place.BRANCH)
    place.git(home.repo, "commit", "-q", "--allow-empty", "-m", "Start")
    pacing = Pacing(seconds=(600.0, 600.0))  # none hands its work in before the stop
    config = FleetConfig(
        url=live_server.url,
        key=access.fresh_key(workspace, access.FLEET_KEY_NAME),
        reviewer="",
        reviewer_password="",
        place=home,
        agents=0,
        pacing=pacing,
    )
    fleet = Fleet(config, DemoPlan(home.plan, pacing, config.ttl))
    began = timezone.now()
    running = threading.Thread(target=fleet.run, name="fleet", daemon=True)
    running.start()
    try:

        def each_made_progress() -> bool:
            sessions = AgentSession.objects.filter(pk__in=seeded)
            return not sessions.exclude(last_progress_at__gt=began).exists()

        wait_until(each_made_progress, "the fleet to carry the seeded sessions on")
        assert live_sessions().filter(pk__in=seeded).count() == len(seeded)
    finally:
        fleet.stop.set()
        running.join(60)
    assert not running.is_alive()
    sessions = AgentSession.objects.filter(pk__in=seeded)
    assert {s.status for s in sessions} == {"ended"}  # the fleet stopped: they stopped too
    assert not fleet.tally.server_errors()


def live_sessions():
    return AgentSession.objects.filter(live_q())
