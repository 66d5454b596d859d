"""The seed's live sessions, carried on by the fleet as their agents would.

``seed_demo`` leaves a few agents live, each holding an issue in progress: a snapshot
of a busy moment. Left alone they would heartbeat never again and show stalled, then
dead, within two minutes of ``make run``, though nothing went wrong. So the fleet takes
them over through the API, as a runner keeps its agent's protocol: it heartbeats each
within the TTL, reports progress within the stall threshold, and after a span of work
hands the issue in (its running run finished, then ``finish_work`` with a report: in
review, for the reviewer) and the session ends; what it could not hand in (its lease
taken meanwhile) it ends, releasing ``agent_ended``. At the fleet's stop the rest end
the same way.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from demo.fleet.client import Client
from demo.fleet.context import FleetContext

TICK_SECONDS = 1.0


@dataclass
class Carried:
    session: int
    agent: str
    issue: int | None
    done_at: float  # monotonic: when its work is handed in
    next_beat: float = 0.0
    next_progress: float = 0.0
    steps: int = 0


class SeededWork:
    def __init__(self, context: FleetContext, *, seed: int | None = None) -> None:
        config = context.config
        self.context = context
        self.rng = random.Random(seed)
        self.api = Client(
            config.url, context.tally, context.stop, {"Authorization": f"Bearer {config.key}"}
        )
        # Well inside the TTL and the stall threshold, as the runner heartbeats.
        self.beat_every = config.ttl / 4
        self.progress_every = config.pacing.stall_after / 3
        self.carried: list[Carried] = []
        self.thread = threading.Thread(target=self.run, name="seeded-work", daemon=True)

    def take_over(self) -> int:
        """The sessions live now (call it before the runners register) and the issue
        each holds; returns how many."""
        answer = self.api.get("/sessions/?live=true", label="/sessions/")
        if answer is None or not answer.ok:
            return 0
        rows = answer.body["results"] if isinstance(answer.body, dict) else answer.body
        low, high = self.context.config.pacing.seconds
        now = time.monotonic()
        for row in rows:
            leases = self.api.get(f"/leases/?active=true&session={row['id']}", label="/leases/")
            held = []
            if leases is not None and leases.ok:
                body = leases.body
                held = body["results"] if isinstance(body, dict) else body
            issue = held[0]["issue"] if held else None
            self.carried.append(
                Carried(row["id"], row["agent"], issue, now + self.rng.uniform(low, high))
            )
        self.context.say(f"carrying on {len(self.carried)} seeded sessions", level=1)
        return len(self.carried)

    def run(self) -> None:
        try:
            while self.carried and not self.context.stop.is_set():
                now = time.monotonic()
                for carried in list(self.carried):
                    self.tend(carried, now)
                self.context.stop.wait(TICK_SECONDS)
        finally:
            for carried in self.carried:  # the fleet stops: they stop too, cleanly
                self.api.post(f"/sessions/{carried.session}/end/", label="/sessions/{id}/end/")
            self.carried.clear()
            self.api.close()

    def tend(self, carried: Carried, now: float) -> None:
        if now >= carried.done_at:
            self.hand_in(carried)
            self.carried.remove(carried)
            return
        if now >= carried.next_beat:
            self.api.post(
                f"/sessions/{carried.session}/heartbeat/", label="/sessions/{id}/heartbeat/"
            )
            carried.next_beat = now + self.beat_every
        if now >= carried.next_progress:
            carried.steps += 1
            what = f"#{carried.issue}" if carried.issue else "its work"
            self.api.post(
                f"/sessions/{carried.session}/progress/",
                {"note": f"working on {what}: step {carried.steps}"},
                label="/sessions/{id}/progress/",
            )
            carried.next_progress = now + self.progress_every

    def hand_in(self, carried: Carried) -> None:
        # Its run first, as a runner finishes it: else ending the session cancels it.
        runs = self.api.get(f"/runs/?status=running&session={carried.session}", label="/runs/")
        if runs is not None and runs.ok:
            rows = runs.body["results"] if isinstance(runs.body, dict) else runs.body
            for run in rows:
                self.api.post(
                    f"/runs/{run['id']}/finish/",
                    {"outcome": "succeeded"},
                    label="/runs/{id}/finish/",
                )
        if carried.issue is not None:
            finished = self.api.post(
                "/work/finish/",
                {
                    "session": carried.session,
                    "issue": carried.issue,
                    "report": {
                        "summary": f"{carried.agent} finished the work it had in progress.",
                        "verification": "The demo's checks pass.",
                    },
                },
                label="/work/finish/",
            )
            if finished is not None and finished.ok:  # its session ended with it
                self.context.count("seeded handed in")
                self.context.say(f"{carried.agent} handed in #{carried.issue}")
                return
        self.api.post(f"/sessions/{carried.session}/end/", label="/sessions/{id}/end/")
        self.context.count("seeded ended")
