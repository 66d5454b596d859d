"""The person beside the demo fleet: reviews handed-in work and keeps the queue fed.

Only a person passes the human gate (``in_review → done``), so the reviewer logs in
to the site and calls the same API with its session cookie (docs/api.md, Auth). In
turns it reviews the oldest issues in review (done, changes requested: back to the
queue, where a runner takes the issue again on its branch; or now and then
cancelled), and, when the ready queue runs low, refills it: a backlog issue groomed to
todo, or a new one filed with the files it will touch (its plan entry written first,
so the scripted agent knows it), so the fleet can run for hours. A person's calls
count against the per-address rate limit, so the reviewer acts only every few seconds.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any

from demo import world
from demo.fleet.client import PersonClient
from demo.fleet.context import FleetContext
from demo.state import BOUNCE_CHANCE, PRIORITIES, PRIORITY_WEIGHTS

REVIEWS_PER_TURN = 4
QUEUE_PER_PROJECT = 3  # fewer ready issues in a project: the reviewer adds one
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
        oldest = sorted(fleets(answer.body["results"]), key=lambda issue: issue["id"])
        for issue in oldest[:REVIEWS_PER_TURN]:
            draw = self.rng.random()
            if draw < CANCEL_CHANCE:
                if self.move(issue, "cancelled"):
                    self.post(issue, "Cancelled: superseded by another change.")
                    self.say(f"cancelled #{issue['id']}")
            elif draw < CANCEL_CHANCE + BOUNCE_CHANCE:
                # Back to the queue: a runner takes it again and continues its branch.
                if self.move(issue, "in_progress") and self.move(issue, "todo"):
                    self.post(issue, "Changes requested: see the review notes.")
                    self.context.count("sent back")
                    self.say(f"sent #{issue['id']} back")
            elif self.move(issue, "done"):
                self.context.count("accepted")
                self.say(f"accepted #{issue['id']}")

    # --- planning -------------------------------------------------------------------------

    def plan(self) -> None:
        """Work a dead agent left in progress goes back to the queue; then, when a
        project's queue is short (each runner works its agent's home project), its
        oldest described backlog issue is groomed into it, else a new one filed."""
        ready = self.api.get("/issues/ready/?include_not_ready=true", label="/issues/ready/")
        if ready is None or not ready.ok:
            return
        # In progress with nobody live holding it: all it lacks to be ready is its status.
        orphans = [
            issue
            for issue in fleets(ready.body["results"])
            if issue["status"] == "in_progress" and issue["missing"] == ["status"]
        ]
        if orphans:
            issue = min(orphans, key=lambda issue: issue["id"])
            if self.move(issue, "todo"):
                self.post(issue, "Its agent stopped heartbeating: back to the queue.")
                self.context.count("requeued")
                self.say(f"put #{issue['id']} back in the queue (its agent died)")
            return
        todo = [issue for issue in ready.body["results"] if issue["status"] == "todo"]
        queued = Counter(issue["project"] for issue in todo if not issue["missing"])
        spec = min(world.PROJECTS, key=lambda spec: (queued[spec.key], self.rng.random()))
        if queued[spec.key] >= QUEUE_PER_PROJECT:
            return
        backlog = self.api.get(f"/issues/?status=backlog&project={spec.key}", label="/issues/")
        if backlog is None or not backlog.ok:
            return
        # Entering todo needs the definition of ready: a description, at least.
        described = [issue for issue in backlog.body["results"] if issue["description"].strip()]
        if described:
            issue = min(described, key=lambda issue: issue["id"])
            if self.move(issue, "todo"):
                self.context.count("groomed")
                self.say(f"groomed #{issue['id']} into the queue")
                return
        self.file(spec)

    def file(self, spec: world.ProjectSpec) -> None:
        """A new issue in ``spec``'s project (the one with the shortest queue: each runner
        works its agent's home project), with the files it will touch: filed in the
        backlog, planned, then moved to todo (the runners see it only then)."""
        paths = list(world.draw_footprint(self.rng, spec))
        title = world.draw_title(self.rng, spec)
        body = {
            "project": spec.key,
            "title": title,
            "description": self.rng.choice(world.DONE_WHEN),
            "priority": self.rng.choices(PRIORITIES, weights=PRIORITY_WEIGHTS)[0],
            "requires_filesystem": True,
            "paths": paths,
        }
        answer = self.api.post("/issues/", body)
        if answer is None or answer.status != 201:
            return
        issue = answer.body
        self.context.planned(int(issue["id"]), title, spec.key, paths)
        if self.move(issue, "todo"):
            self.context.count("filed")
            self.say(f"filed #{issue['id']} ({spec.key}: {title})")

    # --- helpers ----------------------------------------------------------------------------

    def move(self, issue: dict[str, Any], to: str) -> bool:
        answer = self.api.post(
            f"/issues/{issue['id']}/transition/", {"to": to}, label="/issues/{id}/transition/"
        )
        return answer is not None and answer.ok

    def post(self, issue: dict[str, Any], body: str) -> None:
        self.api.post("/messages/", {"scope": f"issue:{issue['id']}", "body": body})


def fleets(issues: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The issues of the fleet's projects: the tour's project is a person's to work and
    to review (``access.tour_issue``)."""
    return [issue for issue in issues if issue["project"] in world.PROJECTS_BY_KEY]
