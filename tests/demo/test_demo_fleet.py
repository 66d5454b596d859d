"""``demo_fleet``: the live demo's agents, over real HTTP against a live server, with a
short TTL. Their sessions outlive the TTL (they heartbeat), events keep coming, claims
collide, a crash leaves a lease or claims that another agent reclaims once stale, and
the server never answers 5xx. Every wait is on a condition."""

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db.models import DateTimeField, ExpressionWrapper, Max, Value

from coordination.liveness import DbNow
from coordination.models import (
    AgentSession,
    ApiKey,
    ClaimConflict,
    Event,
    FileClaim,
    IssueLease,
    ReleaseReason,
    Workspace,
)
from demo import access
from demo.fleet import Fleet, FleetConfig

pytestmark = pytest.mark.django_db(transaction=True)

TTL = 3  # seconds: a crash's holdings go stale quickly
PATIENCE = 60.0  # seconds a condition may take on a loaded machine before the test fails


def wait_until(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {PATIENCE:g} s for {what}")
        time.sleep(0.1)


def seconds_ago(seconds: float) -> ExpressionWrapper:
    """The database's now minus ``seconds`` (liveness is judged on its clock)."""
    return ExpressionWrapper(
        DbNow() - Value(timedelta(seconds=seconds)), output_field=DateTimeField()
    )


@pytest.fixture
def demo(settings) -> Workspace:
    settings.PROJEKTOR_SESSION_TTL_SECONDS = TTL
    call_command("seed_demo", "--agents", "4", "--days", "1", stdout=StringIO())
    return Workspace.objects.get(slug="demo")


def newest_event_id(workspace: Workspace) -> int:
    return Event.objects.filter(workspace=workspace).aggregate(top=Max("id"))["top"] or 0


def test_the_fleet_keeps_the_demo_alive_over_http(demo, live_server):
    reviewer, password = access.reviewer_login(demo)
    fleet = Fleet(
        FleetConfig(
            url=live_server.url,
            key=access.fresh_key(demo, access.FLEET_KEY_NAME),
            reviewer=reviewer,
            reviewer_password=password,
            agents=4,
            interval=0.15,
            ttl=TTL,
            crash_chance=0.5,
            session_actions=(6, 40),
            seed=3,
        )
    )
    before = newest_event_id(demo)
    started = ClaimConflict.objects.aggregate(top=Max("id"))["top"] or 0
    runner = threading.Thread(target=fleet.run, name="demo-fleet-test")
    runner.start()
    try:
        wait_until(
            lambda: (
                AgentSession.objects.live()
                .filter(pk__in=list(fleet.record.sessions), started_at__lt=seconds_ago(2 * TTL))
                .exists()
            ),
            "a fleet session live twice the TTL after it registered (heartbeats)",
        )
        wait_until(
            lambda: ClaimConflict.objects.filter(workspace=demo, pk__gt=started).exists(),
            "a claim conflict between the fleet's agents",
        )

        def stale_reclaim() -> bool:
            crashed = list(fleet.record.crashed_sessions)
            expired = {"session__in": crashed, "release_reason": ReleaseReason.EXPIRED}
            return (
                IssueLease.objects.filter(**expired).exists()
                or FileClaim.objects.filter(**expired).exists()
            )

        wait_until(stale_reclaim, "a crashed agent's lease or claims reclaimed as expired")
        mark = newest_event_id(demo)
        assert mark > before
        wait_until(lambda: newest_event_id(demo) > mark, "events still arriving after that")
    finally:
        fleet.stop.set()
        runner.join(timeout=PATIENCE)
    assert not runner.is_alive()
    assert fleet.tally.server_errors() == {}
    assert fleet.tally.failures == []  # no 5xx, and every request answered
    statuses = fleet.tally.statuses()
    assert statuses[201] and statuses[200]
    assert fleet.tally.refusals["file_conflict"] > 0  # refused, and handled
    assert fleet.record.counts["crashed"] > 0 and fleet.record.counts["joined"] > 4
    # Stopped, the fleet ended its sessions (the crashed ones just stopped heartbeating).
    working = set(fleet.record.sessions) - set(fleet.record.crashed_sessions)
    assert not AgentSession.objects.live().filter(pk__in=working).exists()


def test_the_command_runs_with_its_own_key_and_revokes_it(demo, live_server):
    out = StringIO()
    call_command(
        "demo_fleet",
        "--url",
        live_server.url,
        "--seconds",
        "3",
        "--interval",
        "0.2",
        "--agents",
        "3",
        "-v",
        "2",
        stdout=out,
    )
    text = out.getvalue()
    assert "demo fleet: 3 agents and a reviewer at work on " + live_server.url in text
    assert " joined" in text
    summary = text.strip().splitlines()[-1]
    assert " 0 5xx, 0 unanswered" in summary, summary
    keys = ApiKey.objects.filter(workspace=demo, name=access.FLEET_KEY_NAME)
    assert keys.count() == 1 and keys.get().revoked_at is not None
    assert demo.members.filter(username=access.REVIEWER, is_staff=False).exists()
    assert Event.objects.filter(workspace=demo, type="session.registered").exists()
    # The seed's own key is untouched.
    assert ApiKey.objects.filter(
        workspace=demo, name=access.KEY_NAME, revoked_at__isnull=True
    ).exists()


def test_the_command_needs_the_demo_and_a_server(db):
    with pytest.raises(CommandError, match="seed_demo"):
        call_command("demo_fleet", stdout=StringIO())
    call_command("seed_demo", "--agents", "4", "--days", "1", stdout=StringIO())
    with pytest.raises(CommandError, match="healthz"):
        call_command(
            "demo_fleet", "--url", "http://127.0.0.1:9", "--wait", "0.5", stdout=StringIO()
        )
    # It revoked the key it minted.
    assert not ApiKey.objects.filter(name=access.FLEET_KEY_NAME, revoked_at__isnull=True).exists()
