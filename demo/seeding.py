"""The demo workspace: a month of a fleet's history, built through the services.

``seed`` creates the workspace and simulates ``days`` days of ``agents`` agents
working four projects, then the last few minutes up to now. Each step drives the
coordination services for real and is then moved into the past by the ``Clock``,
so every invariant of docs/design.md holds throughout and at the end, and the contention
log, the heatmap and the health pages have a history to show. The same seed gives
the same story, and so the same number of rows in every table.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from django.utils import timezone

from coordination.liveness import session_ttl
from coordination.models import Workspace
from demo import finale, world
from demo.clock import Clock
from demo.graph import link_work
from demo.simulation import Simulation
from demo.state import Worker

SLUG = world.SLUG
SLOT_HOURS = (9, 11, 14, 16)  # UTC; each slot's minute is drawn


def calendar(rng: random.Random, now: datetime, days: int) -> list[list[datetime]]:
    """The work slots of the ``days`` days before today. The schedule does not
    depend on the time of day the seed runs, so neither do the counts."""
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return [
        [
            midnight - timedelta(days=days - day, hours=-hour, minutes=-rng.randrange(50))
            for hour in SLOT_HOURS
        ]
        for day in range(days)
    ]


def seed(*, agents: int, days: int, seed: int) -> Workspace:
    """Create and populate the demo workspace; the caller owns the transaction."""
    rng = random.Random(seed)
    now = timezone.now()
    workspace = Workspace.objects.create(slug=SLUG, name=world.NAME)
    opened = now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=days, hours=-8)
    # The tenant has no service of its own; it is dated to the start of the story.
    Workspace.objects.filter(pk=workspace.pk).update(created_at=opened)
    clock = Clock(workspace)
    sim = Simulation(
        workspace=workspace,
        rng=rng,
        tests_rng=random.Random(f"test-db:{seed}"),
        clock=clock,
        workers=[Worker(spec) for spec in world.draw_roster(rng, agents)],
    )
    with clock.at(opened):
        sim.build()
    for day, slots in enumerate(calendar(rng, now, days)):
        sim.run_day(slots, onboarding=day == 0)
    # Both dead (past the TTL) before the crew starts; the recent one is too recent
    # for anybody to have reclaimed it yet.
    earlier = finale.crash(sim, sim.workers[-2], "web", now - timedelta(hours=3), testing=True)
    recent_moment = now - max(timedelta(minutes=10), 2 * session_ttl())
    recent = finale.crash(sim, sim.workers[-1], "core", recent_moment)
    finale.crew_at_work(sim, earlier=earlier, recent=recent)
    finale.ensure_every_status(sim)
    link_work(workspace)  # chains and an epic: the fleet takes each chain in order
    return workspace
