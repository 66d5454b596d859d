"""The demo fleet's stuck agents: one that heartbeats without progress is shown
stalled by the server (invariant 17), keeps what it holds, and carries on after."""

import threading

import pytest

from coordination.models import AgentSession
from demo import access
from demo.fleet import Fleet, FleetConfig
from tests.demo.test_demo_fleet import PATIENCE, TTL, demo, wait_until  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

STALL_AFTER = 1  # second: a stuck agent is stalled soon, one that acts is not


def test_a_stuck_agent_of_the_fleet_is_stalled_while_it_heartbeats(demo, live_server, settings):  # noqa: F811
    settings.PROJEKTOR_STALL_AFTER_SECONDS = STALL_AFTER
    reviewer, password = access.reviewer_login(demo)
    fleet = Fleet(
        FleetConfig(
            url=live_server.url,
            key=access.fresh_key(demo, access.FLEET_KEY_NAME),
            reviewer=reviewer,
            reviewer_password=password,
            agents=3,
            interval=0.15,
            ttl=TTL,
            crash_chance=0.0,
            stall_chance=1.0,
            stall_after=STALL_AFTER,
            session_actions=(6, 20),
            seed=5,
        )
    )
    runner = threading.Thread(target=fleet.run, name="demo-fleet-stalls")
    runner.start()
    try:

        def stuck_and_stalled() -> bool:
            stuck = list(fleet.record.stuck_sessions)
            return AgentSession.objects.stalled().filter(pk__in=stuck).exists()

        wait_until(stuck_and_stalled, "a stuck agent's session stalled while live")
    finally:
        fleet.stop.set()
        runner.join(timeout=PATIENCE)
    assert not runner.is_alive()
    assert fleet.tally.failures == []
    assert fleet.record.counts["stuck"] > 0
