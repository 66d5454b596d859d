"""What the fleet's actors (its agents and its reviewer) see of the fleet: its
configuration, the stop signal, the tally of answers, and where they report what
happened. The fleet spawns them and hands each this context; they never reach back
into the fleet itself.
"""

from __future__ import annotations

import math
import random
import threading
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from demo import world
from demo.fleet.client import Tally

PARKED_REMEMBERED = 20  # issues whose run found no worktree, waiting for the reviewer


@dataclass(frozen=True)
class FleetConfig:
    url: str
    key: str  # an API key of the workspace
    reviewer: str  # a member's login, for the human gate
    reviewer_password: str
    workspace: str = world.SLUG
    agents: int = 5
    interval: float = 2.0  # seconds between one agent's actions (jittered ±50 %)
    ttl: float = 120.0  # the server's PROJEKTOR_SESSION_TTL_SECONDS
    crash_chance: float = 0.2  # a session ends in a crash rather than a sign-off
    # A session gets stuck now and then: it heartbeats but makes no progress for a
    # little longer than the server's stall threshold (so the server shows it stalled),
    # then carries on.
    stall_chance: float = 0.1
    stall_after: float = 1800.0  # the server's PROJEKTOR_STALL_AFTER_SECONDS
    session_actions: tuple[int, int] = (30, 90)  # a session's length, in actions
    max_issues: int = 250  # the reviewer files new issues only below this many
    seed: int | None = None

    @property
    def beat(self) -> float:
        """Heartbeat period: a quarter of the TTL (at most 15 s), so a slow request
        or two never lets a working session lapse."""
        return min(self.ttl / 4, 15.0)

    @property
    def stuck_actions(self) -> tuple[int, int]:
        """How long a stuck agent sits out, in actions: 1.2 to 1.6 stall thresholds."""
        return (
            math.ceil(1.2 * self.stall_after / self.interval),
            math.ceil(1.6 * self.stall_after / self.interval),
        )

    @property
    def review_every(self) -> float:
        return max(3 * self.interval, 2.5)

    @property
    def min_ready(self) -> int:
        return self.agents + 2

    @property
    def rejoin(self) -> tuple[float, float]:
        """How long a free slot waits for its next agent."""
        return (2 * self.interval, 5 * self.interval)


@dataclass
class Record:
    """What happened, for the summary line and for tests."""

    sessions: list[int] = field(default_factory=list)  # every session the fleet registered
    crashed_sessions: list[int] = field(default_factory=list)
    stuck_sessions: list[int] = field(default_factory=list)  # heartbeating, not progressing
    counts: Counter[str] = field(default_factory=Counter)


class FleetContext:
    """The fleet as its actors see it. Thread-safe: every actor runs in a thread of
    its own."""

    def __init__(
        self,
        config: FleetConfig,
        *,
        say: Callable[[str, int], None] | None = None,
        names_at_work: Callable[[], list[str]] = list,
    ) -> None:
        self.config = config
        self.tally = Tally()
        self.stop = threading.Event()
        self.record = Record()
        # Parked by an agent (its run found no worktree), planned by the reviewer.
        self.unresolved: deque[int] = deque(maxlen=PARKED_REMEMBERED)
        self.lock = threading.Lock()
        self.output = say
        self.names_at_work = names_at_work

    def say(self, text: str, *, level: int = 2) -> None:
        if self.output is not None:
            self.output(text, level)

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.record.counts[what] += n

    def registered(self, session: int) -> None:
        with self.lock:
            self.record.sessions.append(session)
            self.record.counts["joined"] += 1

    def crashed(self, session: int) -> None:
        with self.lock:
            self.record.crashed_sessions.append(session)
            self.record.counts["crashed"] += 1

    def stuck(self, session: int) -> None:
        with self.lock:
            self.record.stuck_sessions.append(session)
            self.record.counts["stuck"] += 1

    def colleague_of(self, name: str, rng: random.Random) -> str | None:
        """Another agent at work now, if there is one."""
        others = [other for other in self.names_at_work() if other != name]
        return rng.choice(others) if others else None
