"""What every agent of the demo fleet is and has: its spec, its random draws, its
client, its session and the issue it holds (``Job``), the fleet as it sees it (a
``FleetContext``), and the calls every part of its work makes (moving an issue,
releasing its files, posting a message, letting an issue go).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any

from demo import world
from demo.fleet.client import AgentClient, Answer
from demo.fleet.context import FleetContext


@dataclass
class Job:
    """The issue an agent holds: its lease's fence, its files, its progress."""

    issue: int
    project: str
    fence: int | None
    paths: tuple[str, ...]
    effort: int
    claimed: bool = False
    progress: int = 0
    run: int | None = None
    waits: int = 0  # actions to wait before dispatching again (the worktree was busy)


class Actor:
    """An agent's state, and the calls every part of its work makes."""

    def __init__(self, context: FleetContext, spec: world.AgentSpec, seed: int) -> None:
        self.context = context
        self.spec = spec
        self.rng = random.Random(seed)
        config = context.config
        self.api = AgentClient(config.url, context.tally, context.stop, config.key)
        self.session: int | None = None
        self.job: Job | None = None
        self.actions_left = 0
        self.crashes = False
        self.stuck_at: int | None = None  # actions_left at which it gets stuck, if it will
        self.stuck_for = 0  # actions it still sits out, heartbeating
        self.capped: dict[str, int] = {}  # project -> actions to keep off it (at its WIP cap)
        self.over = False  # left or crashed: this agent's run is done
        self.thread = threading.Thread(target=self.run, name=f"demo-fleet-{spec.name}", daemon=True)

    def run(self) -> None:
        """The agent's life, in its thread (``FleetAgent``)."""
        raise NotImplementedError

    @property
    def name(self) -> str:
        return self.spec.name

    def say(self, text: str, *, level: int = 2) -> None:
        self.context.say(f"{self.name:<8} {text}", level=level)

    def move(self, issue: int, to: str, report: dict[str, str] | None = None) -> Answer | None:
        body: dict[str, Any] = {"to": to}
        if report is not None:
            body["report"] = report
        return self.api.post(f"/issues/{issue}/transition/", body, label="/issues/{id}/transition/")

    def release_files(self, job: Job) -> None:
        self.api.post("/file-claims/release/", {"issue": job.issue, "session": self.session})

    def post(self, scope: str, body: str) -> None:
        self.api.post("/messages/", {"scope": scope, "body": body, "session": self.session})

    def refused(self, what: str, answer: Answer | None) -> None:
        if answer is not None:
            self.say(f"refused {what}: {answer.code or answer.status}")

    def lost(self, job: Job, answer: Answer) -> None:
        """The issue slipped away (the lease was reclaimed while this agent lagged, the
        issue moved or closed): let it go and look for other work."""
        self.say(f"lost #{job.issue}: {answer.code or answer.status}")
        self.release_files(job)
        self.job = None
