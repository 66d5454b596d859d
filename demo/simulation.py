"""A fleet of agents working the demo workspace, one time slot at a time.

Every change goes through the coordination services, exactly as the API would
make it; refusals (a WIP cap, a contested file, a busy or unresolved worktree)
are the services' own, caught the way an agent would catch them. Randomness comes
from one seeded generator and every query that feeds a decision is ordered, so a
seed always produces the same history.
"""

from __future__ import annotations

from datetime import datetime

from coordination.services import agents, projects, resources, worktrees
from demo import world
from demo.agents import Agents
from demo.humans import Humans
from demo.state import LONGEST_SESSION, START_CHANCE


class Simulation(Humans, Agents):
    """A fleet of agents and the humans who plan and review their work."""

    # --- setup ------------------------------------------------------------------

    def build(self) -> None:
        """Worktrees, projects and the test databases; agents appear when they first
        register."""
        for slug, name in world.SHARED_WORKTREES:
            self.add_worktree(slug, name, branch="main")
        for worker in self.workers:
            if worker.spec.worktree is not None:
                self.add_worktree(
                    worker.spec.worktree, f"{worker.name}'s checkout", branch=f"agent/{worker.name}"
                )
        for spec in world.PROJECTS:
            projects.create_project(
                workspace=self.workspace,
                key=spec.key,
                name=spec.name,
                agent_wip_limit=spec.wip_limit,
                primary_worktree=spec.primary_worktree,
            )
        resources.create_resource(
            workspace=self.workspace,
            name=world.TEST_DB,
            capacity=world.TEST_DB_CAPACITY,
            description=world.TEST_DB_DESCRIPTION,
        )

    def add_worktree(self, slug: str, name: str, *, branch: str) -> None:
        worktrees.create_worktree(
            workspace=self.workspace,
            slug=slug,
            name=name,
            path=f"/srv/projektor/worktrees/{slug}",
            branch=branch,
        )

    # --- the calendar -------------------------------------------------------------

    def run_day(self, slots: list[datetime], *, onboarding: bool) -> None:
        """One day: humans plan in the morning, agents work the slots, humans
        review in the evening. On the first day every agent shows up once."""
        first_slot = (
            {w.name: self.rng.randrange(len(slots)) for w in self.workers} if onboarding else {}
        )
        for index, when in enumerate(slots):
            with self.clock.at(when):
                if index == 0:
                    self.plan_the_day(onboarding=onboarding)
                joining = [name for name, slot in first_slot.items() if slot == index]
                self.open_sessions(len(slots) - index, joining=joining)
                self.work_slot()
                if index == len(slots) - 1:
                    self.review()

    def open_sessions(self, remaining: int, *, joining: list[str]) -> None:
        """Working agents heartbeat first, so nobody reclaims what they still hold;
        then idle ones may start."""
        for worker in self.workers:
            if worker.session_id is not None:
                agents.heartbeat_session(workspace=self.workspace, session_id=worker.session_id)
        for worker in self.workers:
            if worker.session_id is None and (
                worker.name in joining or self.rng.random() < START_CHANCE
            ):
                self.register(worker, slots=self.rng.randint(1, min(LONGEST_SESSION, remaining)))

    def work_slot(self) -> None:
        active = [w for w in self.workers if w.session_id is not None]
        self.rng.shuffle(active)
        for worker in active:
            self.work(worker)
        for worker in active:
            self.wrap_up(worker)
