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
from collections.abc import Callable

from demo import world
from demo.fleet.agent import FleetAgent
from demo.fleet.client import NO_ANSWER, AgentClient, Tally
from demo.fleet.context import FleetConfig, FleetContext, Record
from demo.fleet.reviewer import Reviewer

SUMMARY_EVERY_SECONDS = 60.0
ROSTER_AT_LEAST = 12  # the seed's default fleet: its agents come back to work
JOIN_TIMEOUT_SECONDS = 35.0  # an actor's last request may wait on a lock


class Fleet:
    def __init__(self, config: FleetConfig, say: Callable[[str, int], None] | None = None) -> None:
        self.config = config
        self.context = FleetContext(config, say=say, names_at_work=self.names_at_work)
        self.rng = random.Random(config.seed)
        self.agents: list[FleetAgent] = []
        self.roster: list[world.AgentSpec] = []
        self.reviewer = Reviewer(self.context, seed=self.rng.randrange(2**32))

    # What callers watch (the command, tests): the context's.

    @property
    def tally(self) -> Tally:
        return self.context.tally

    @property
    def stop(self) -> threading.Event:
        return self.context.stop

    @property
    def record(self) -> Record:
        return self.context.record

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
                    self.context.say(self.summary(), level=1)
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
        agent = FleetAgent(self.context, self.rng.choice(free), seed=self.rng.randrange(2**32))
        self.agents.append(agent)
        agent.thread.start()

    def names_at_work(self) -> list[str]:
        return [agent.name for agent in list(self.agents)]

    # --- the summary line -------------------------------------------------------------

    def summary(self) -> str:
        statuses = self.tally.statuses()
        server_errors = sum(n for status, n in statuses.items() if status >= 500)
        with self.tally.lock:
            refusals = dict(self.tally.refusals)
        with self.context.lock:
            counts = dict(self.record.counts)
        refused = ", ".join(f"{code} {n}" for code, n in sorted(refusals.items())) or "none"
        happened = ", ".join(f"{what} {n}" for what, n in sorted(counts.items())) or "nothing yet"
        return (
            f"fleet: {len(self.agents)} agents; {sum(statuses.values())} requests, "
            f"{server_errors} 5xx, {statuses.get(NO_ANSWER, 0)} unanswered; "
            f"refusals: {refused}; {happened}"
        )
