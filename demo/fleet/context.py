"""What the fleet's reviewer sees of the fleet: its configuration, the stop signal,
the tally of answers, where it says what happened, and the plan it files new work
into. The fleet makes it and hands it the context; it never reaches back into the
fleet itself.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from demo import world
from demo.fleet.client import Tally
from demo.fleet.place import Place
from demo.fleet.plan import DemoPlan, Pacing


@dataclass(frozen=True)
class FleetConfig:
    url: str
    key: str  # an API key of the workspace, for the runners
    reviewer: str  # a member's login, for the human gate
    reviewer_password: str
    place: Place
    workspace: str = world.SLUG
    agents: int = 4
    pacing: Pacing = Pacing()
    ttl: float = 120.0  # the server's PROJEKTOR_SESSION_TTL_SECONDS
    review_every: float = 5.0  # seconds between the reviewer's turns (jittered)
    grace: float = 15.0  # seconds the runners get to give their work back at the stop
    seed: int | None = None


@dataclass
class Record:
    """What happened, for the summary line and for tests."""

    counts: Counter[str] = field(default_factory=Counter)


class FleetContext:
    """The fleet as its reviewer sees it. Thread-safe."""

    def __init__(
        self, config: FleetConfig, plan: DemoPlan, *, say: Callable[[str, int], None] | None = None
    ) -> None:
        self.config = config
        self.plan = plan
        self.tally = Tally()
        self.stop = threading.Event()
        self.record = Record()
        self.lock = threading.Lock()
        self.output = say

    def say(self, text: str, *, level: int = 2) -> None:
        if self.output is not None:
            self.output(text, level)

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.record.counts[what] += n

    def planned(self, issue: int, title: str, project: str, paths: Iterable[str]) -> None:
        """A new issue's plan entry, written before the issue enters the queue."""
        with self.lock:
            self.plan.add(issue, title, project, paths)
            self.plan.save()
