"""The demo fleet: a few agents and a reviewer working the demo workspace over HTTP.

One thread per actor, each with its own kept-alive connection; the fleet keeps
``agents`` of them at work, and when one leaves or crashes a fresh one joins a few
beats later under a name not in use. Nothing here touches the database: everything
goes through the REST API, as a real fleet's would (the command mints the key and
the reviewer's login before it starts the fleet).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from demo import world
from demo.fleet.agent import FleetAgent
from demo.fleet.client import NO_ANSWER, AgentClient, Tally
from demo.fleet.reviewer import Reviewer

SUMMARY_EVERY_SECONDS = 60.0
ROSTER_AT_LEAST = 12  # the seed's default fleet: its agents come back to work
JOIN_TIMEOUT_SECONDS = 35.0  # an actor's last request may wait on a lock


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
    session_actions: tuple[int, int] = (30, 90)  # a session's length, in actions
    max_issues: int = 250  # the reviewer files new issues only below this many
    seed: int | None = None

    @property
    def beat(self) -> float:
        """Heartbeat period: a quarter of the TTL (at most 15 s), so a slow request
        or two never lets a working session lapse."""
        return min(self.ttl / 4, 15.0)

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
    counts: Counter[str] = field(default_factory=Counter)


class Fleet:
    def __init__(self, config: FleetConfig, say: Callable[[str, int], None] | None = None) -> None:
        self.config = config
        self.tally = Tally()
        self.stop = threading.Event()
        self.rng = random.Random(config.seed)
        self.record = Record()
        self.lock = threading.Lock()
        self.agents: list[FleetAgent] = []
        self.roster: list[world.AgentSpec] = []
        self.reviewer = Reviewer(self, seed=self.rng.randrange(2**32))
        self.output = say

    # --- the run ----------------------------------------------------------------------

    def run(self, seconds: float | None = None) -> Record:
        """Work until ``seconds`` have passed (``None``: until ``stop`` is set, or
        Ctrl-C), then end every live session and return what happened."""
        deadline = time.monotonic() + seconds if seconds else float("inf")
        next_summary = time.monotonic() + SUMMARY_EVERY_SECONDS
        self.roster = self.draw_roster()
        self.reviewer.thread.start()
        for _ in range(self.config.agents):
            self.spawn()
        joining: list[float] = []
        try:
            while not self.stop.wait(0.1):
                now = time.monotonic()
                if now >= deadline:
                    break
                for agent in [a for a in self.agents if a.over or not a.thread.is_alive()]:
                    self.agents.remove(agent)
                    joining.append(now + self.rng.uniform(*self.config.rejoin))
                for due in [t for t in joining if t <= now]:
                    joining.remove(due)
                    self.spawn()
                if now >= next_summary:
                    self.say(self.summary(), level=1)
                    next_summary = now + SUMMARY_EVERY_SECONDS
        finally:
            self.stop.set()
            threads = [agent.thread for agent in self.agents] + [self.reviewer.thread]
            for thread in threads:
                if thread.is_alive():
                    thread.join(JOIN_TIMEOUT_SECONDS)
        return self.record

    def draw_roster(self) -> list[world.AgentSpec]:
        """The demo's agents, by name and profile as the seed cast them; an agent is
        bound to its own checkout when the workspace has one."""
        client = AgentClient(self.config.url, self.tally, self.stop, self.config.key)
        try:
            answer = client.get("/worktrees/")
        finally:
            client.close()
        slugs = {tree["slug"] for tree in answer.body["results"]} if answer and answer.ok else set()
        size = max(ROSTER_AT_LEAST, self.config.agents + 4)
        return [
            world.AgentSpec(
                name=name,
                profile=world.PROFILES[index % len(world.PROFILES)],
                worktree=world.own_worktree(name) if world.own_worktree(name) in slugs else None,
            )
            for index, name in enumerate(world.AGENT_NAMES[:size])
        ]

    def spawn(self) -> None:
        busy = {agent.name for agent in self.agents}
        free = [spec for spec in self.roster if spec.name not in busy]
        if not free:
            return
        agent = FleetAgent(self, self.rng.choice(free), seed=self.rng.randrange(2**32))
        self.agents.append(agent)
        agent.thread.start()

    # --- what the actors report -------------------------------------------------------

    def say(self, text: str, *, level: int = 2) -> None:
        if self.output is not None:
            self.output(text, level)

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.record.counts[what] += n

    def registered(self, agent: FleetAgent, session: int) -> None:
        with self.lock:
            self.record.sessions.append(session)
            self.record.counts["joined"] += 1

    def crashed(self, agent: FleetAgent, session: int) -> None:
        with self.lock:
            self.record.crashed_sessions.append(session)
            self.record.counts["crashed"] += 1

    def ended(self, agent: FleetAgent) -> None:
        self.count("signed off")

    def carried_on(self, issue: int) -> None:
        self.count("carried on")

    def reclaimed(self, paths: int) -> None:
        self.count("paths reclaimed", paths)

    def handed_in(self) -> None:
        self.count("handed in")

    def accepted(self) -> None:
        self.count("accepted")

    def unresolved(self, issue: int) -> None:
        self.reviewer.unresolved.append(issue)

    def colleague_of(self, agent: FleetAgent) -> str | None:
        others = [other.name for other in list(self.agents) if other is not agent]
        return self.rng.choice(others) if others else None

    def summary(self) -> str:
        statuses = self.tally.statuses()
        server_errors = sum(n for status, n in statuses.items() if status >= 500)
        with self.tally.lock:
            refusals = dict(self.tally.refusals)
        with self.lock:
            counts = dict(self.record.counts)
        refused = ", ".join(f"{code} {n}" for code, n in sorted(refusals.items())) or "none"
        happened = ", ".join(f"{what} {n}" for what, n in sorted(counts.items())) or "nothing yet"
        return (
            f"fleet: {len(self.agents)} agents; {sum(statuses.values())} requests, "
            f"{server_errors} 5xx, {statuses.get(NO_ANSWER, 0)} unanswered; "
            f"refusals: {refused}; {happened}"
        )
