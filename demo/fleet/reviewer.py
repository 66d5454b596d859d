"""The person beside the demo fleet: reviews handed-in work and keeps the queue fed.

Only a person passes the human gate (``in_review → done``), so the reviewer logs in
to the site and calls the same API with its session cookie (docs/api.md, Auth). In
turns it reviews the oldest issues in review (done, changes requested, or now and
then cancelled), and, when the ready queue runs low, refills it: a backlog issue
groomed to todo, a done one reopened, or a new one filed, so the fleet can run for
hours with the number of issues staying bounded. A person's calls count against the
per-address rate limit, so the reviewer acts only every few seconds.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from demo import world
from demo.fleet.client import PersonClient
from demo.fleet.context import FleetContext
from demo.state import BOUNCE_CHANCE

REVIEWS_PER_TURN = 4
CANCEL_CHANCE = 0.04  # a review cancels the work; else it is sent back or accepted


class Reviewer:
    def __init__(self, context: FleetContext, seed: int) -> None:
        self.context = context
        self.rng = random.Random(seed)
        config = context.config
        self.api = PersonClient(config.url, context.tally, context.stop, config.workspace)
        self.thread = threading.Thread(target=self.run, name="demo-fleet-reviewer", daemon=True)
        self.turn = 0

    def say(self, text: str, *, level: int = 2) -> None:
        self.context.say(f"{'reviewer':<8} {text}", level=level)

    def run(self) -> None:
        config = self.context.config
        try:
            if not self.api.log_in(config.reviewer, config.reviewer_password):
                self.say("could not log in: nobody reviews or plans", level=1)
                return
            while not self.context.stop.wait(config.review_every * self.rng.uniform(0.7, 1.3)):
                self.turn += 1
                self.review()
                if self.turn % 2 == 0:
                    self.plan()
        finally:
            self.api.close()

    # --- review -----------------------------------------------------------------------

    def review(self) -> None:
        answer = self.api.get("/issues/?status=in_review", label="/issues/")
        if answer is None or not answer.ok:
            return
        oldest = sorted(answer.body["results"], key=lambda issue: issue["id"])
        for issue in oldest[:REVIEWS_PER_TURN]:
            draw = self.rng.random()
            if draw < CANCEL_CHANCE:
                if self.move(issue, "cancelled"):
                    self.post(issue, "Cancelled: superseded by another change.")
                    self.say(f"cancelled #{issue['id']}")
            elif draw < CANCEL_CHANCE + BOUNCE_CHANCE:
                if self.move(issue, "in_progress"):
                    self.post(issue, "Changes requested: see the review notes.")
                    self.say(f"sent #{issue['id']} back")
            elif self.move(issue, "done"):
                self.context.count("accepted")
                self.say(f"accepted #{issue['id']}")

    # --- planning -------------------------------------------------------------------------

    def plan(self) -> None:
        """Give a parked issue (its run found no worktree) the integration checkout and
        put it back in the queue; else, when the queue is short, groom the backlog."""
        if self.context.unresolved:
            number = self.context.unresolved.popleft()
            answer = self.api.call(
                "PATCH",
                f"/issues/{number}/",
                {"worktree": world.INTEGRATION_WORKTREE},
                label="/issues/{id}/",
            )
            if answer is not None and answer.ok and self.move(answer.body, "todo"):
                self.say(f"gave #{number} the {world.INTEGRATION_WORKTREE} checkout")
            return
        ready = self.api.get("/issues/ready/", label="/issues/ready/")
        if ready is None or not ready.ok or ready.body["count"] >= self.context.config.min_ready:
            return
        backlog = self.api.get("/issues/?status=backlog", label="/issues/")
        if backlog is None or not backlog.ok:
            return
        # Entering todo needs the definition of ready: a description, at least.
        described = [issue for issue in backlog.body["results"] if issue["description"].strip()]
        if described:
            issue = min(described, key=lambda issue: issue["id"])
            if self.move(issue, "todo"):
                self.say(f"groomed #{issue['id']} into the queue")

    # --- helpers ----------------------------------------------------------------------------

    def move(self, issue: dict[str, Any], to: str) -> bool:
        answer = self.api.post(
            f"/issues/{issue['id']}/transition/", {"to": to}, label="/issues/{id}/transition/"
        )
        return answer is not None and answer.ok

    def post(self, issue: dict[str, Any], body: str) -> None:
        self.api.post("/messages/", {"scope": f"issue:{issue['id']}", "body": body})
