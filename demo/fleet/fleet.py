"""The demo fleet: a few real runners and a reviewer working the demo workspace.

Each agent is a ``projektor run --loop --worktrees … --integrate --queue --verify …
--hooks claude-code`` process with the scripted agent (``demo.workbench.agent``) on
the demo repository: it takes the head of the ready queue, works the issue on a
branch of its own worktree (its edits claimed as it makes them), runs its tests
holding one of the two test databases (``projektor hold``), queues its branch in the
project's landing queue (the runners test its batches with the repository's
``check.py`` and move ``main`` only to a tree that passed it) and hands the issue in
once it landed; now and then its agent crashes and the runner gives the issue back,
or sits idle past the stall threshold while the runner heartbeats. The reviewer, a
person, moves the handed-in work on and keeps the queue fed. The sessions the seed
left live are carried on until they hand their work in (``demo.fleet.seeded``).
Nothing here touches the database: the command prepares it before it starts the
fleet.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from demo import world
from demo.fleet import place
from demo.fleet.client import NO_ANSWER, Tally
from demo.fleet.context import FleetConfig, FleetContext, Record
from demo.fleet.plan import DemoPlan
from demo.fleet.reviewer import Reviewer
from demo.fleet.runners import Runners, RunnerSpec
from demo.fleet.seeded import SeededWork

SUMMARY_EVERY_SECONDS = 60.0
TEND_EVERY_SECONDS = 0.5
JOIN_TIMEOUT_SECONDS = 35.0  # the reviewer's last request may wait on a lock


class Fleet:
    def __init__(
        self,
        config: FleetConfig,
        plan: DemoPlan,
        say: Callable[[str, int], None] | None = None,
    ) -> None:
        self.config = config
        self.started_at = ""  # main's commit when the fleet started
        self.context = FleetContext(config, plan, say=say)
        self.rng = random.Random(config.seed)
        self.reviewer = Reviewer(self.context, seed=self.rng.randrange(2**32))
        self.seeded = SeededWork(self.context, seed=self.rng.randrange(2**32))
        spec = RunnerSpec(
            url=config.url,
            key=config.key,
            place=config.place,
            # Its tests hold a test database: projektor hold, in the runner's session.
            agent_args=("--plan", str(plan.path), "--coordinated", "--hold-tests", world.TEST_DB),
        )
        homes: dict[str, str | None] = {
            name: world.PROFILES[index % len(world.PROFILES)].home
            for index, name in enumerate(world.AGENT_NAMES[: config.agents])
        }
        self.runners = Runners(
            spec, homes, say=lambda text, level: self.context.say(text, level=level)
        )

    @property
    def tally(self) -> Tally:
        return self.context.tally

    @property
    def stop(self) -> threading.Event:
        return self.context.stop

    @property
    def record(self) -> Record:
        return self.context.record

    def run(self, seconds: float | None = None) -> Record:
        """Work until ``seconds`` have passed (``None``: until ``stop`` is set), then
        stop the runners (their work given back) and the reviewer."""
        deadline = time.monotonic() + seconds if seconds else float("inf")
        next_summary = time.monotonic() + SUMMARY_EVERY_SECONDS
        self.started_at = place.git(self.config.place.repo, "rev-parse", place.BRANCH).strip()
        self.reviewer.thread.start()
        try:
            # The seed's live sessions first, before the runners' own are live too.
            if self.seeded.take_over():
                self.seeded.thread.start()
            self.runners.start_all()
            while not self.stop.wait(TEND_EVERY_SECONDS):
                now = time.monotonic()
                if now >= deadline:
                    break
                self.runners.tend()
                if now >= next_summary:
                    self.context.say(self.summary(), level=1)
                    next_summary = now + SUMMARY_EVERY_SECONDS
        finally:
            self.stop.set()
            self.runners.stop(self.config.grace)
            for thread in (self.reviewer.thread, self.seeded.thread):
                if thread.is_alive():
                    thread.join(JOIN_TIMEOUT_SECONDS)
        return self.record

    def landed(self) -> int:
        """Commits on the demo repository's main since the fleet started."""
        if not self.started_at:
            return 0
        span = f"{self.started_at}..{place.BRANCH}"
        return int(place.git(self.config.place.repo, "rev-list", "--count", span))

    def summary(self) -> str:
        statuses = self.tally.statuses()
        server_errors = sum(n for status, n in statuses.items() if status >= 500)
        with self.context.lock:
            counts = dict(self.record.counts)
        happened = ", ".join(f"{what} {n}" for what, n in sorted(counts.items())) or "nothing yet"
        return (
            f"fleet: {self.runners.alive()} runners at work ({self.runners.restarts} restarted), "
            f"{self.landed()} commits landed on main; "
            f"reviewer: {sum(statuses.values())} requests, {server_errors} 5xx, "
            f"{statuses.get(NO_ANSWER, 0)} unanswered; {happened}"
        )
