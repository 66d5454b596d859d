"""What the demo simulation knows, and the helpers its humans and agents share.

``State`` holds the workspace, the one seeded generator, the clock, the workers and
each issue's hidden plan; ``Humans`` and ``Agents`` act on it, and ``Simulation``
is both. The chances below are tuned together.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from django.db.models import Exists, OuterRef

from coordination.models import Issue, IssueLease, Workspace
from coordination.services import messages, workflow
from demo import world
from demo.clock import Clock

S = Issue.Status

# How a fleet behaves; tuned so a default month has a few hundred sessions,
# thousands of file claims, hundreds of conflicts and tens of WIP denials.
START_CHANCE = 0.28  # an idle agent opens a session in a slot
LONGEST_SESSION = 3  # slots
CRASH_CHANCE = 0.12  # a session dies instead of ending
FORCE_CHANCE = 0.2  # a refused claimer takes the files by force
FAILURE_CHANCE = 0.08  # a run fails
HOME_CHANCE = 0.65  # an agent looks in its own project first
DONE_CHANCE = 0.7  # a reviewer accepts an issue in review
PRIORITIES = (0, 1, 2, 3, 4)  # none, urgent, high, medium, low
PRIORITY_WEIGHTS = (3, 1, 2, 4, 2)
BOUNCE_CHANCE = 0.12  # a reviewer sends it back to work
TEST_DB_CHANCE = 0.5  # a run's tests need one of the test databases (world.TEST_DB)


@dataclass
class Worker:
    """What an agent is doing right now, as far as the simulation knows."""

    spec: world.AgentSpec
    session_id: int | None = None
    slots_left: int = 0
    issue_id: int | None = None
    run_id: int | None = None
    registered: bool = False
    holds_test_db: bool = False  # one of the test databases, while its run's tests run

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class Plan:
    """An issue's hidden truth: which files it touches and how much work it is."""

    project: str
    footprint: tuple[str, ...]
    effort: int
    progress: int = 0


@dataclass
class State:
    """The simulation's world: what every actor reads, and the helpers they share."""

    workspace: Workspace
    rng: random.Random
    clock: Clock
    workers: list[Worker]
    plans: dict[int, Plan] = field(default_factory=dict)
    # Which runs' tests need a test database: a generator of its own (seeded from the
    # same seed), so that the holds leave the rest of the story as it was.
    tests_rng: random.Random = field(default_factory=random.Random)
    skipped: list[int] = field(default_factory=list)  # issues whose run was unresolved

    # --- helpers every actor uses ------------------------------------------------------------

    def issues(self, *statuses: str) -> list[Issue]:
        return list(
            Issue.objects.filter(workspace=self.workspace, status__in=statuses).order_by("id")
        )

    def open_issues(self, project_key: str) -> list[Issue]:
        """Open issues of the project nobody live holds: carry-overs first (whose
        holder ended, crashed or was sent back by review), then todo, oldest first."""
        held = IssueLease.objects.live().filter(issue=OuterRef("pk"))
        rows = (
            Issue.objects.filter(
                workspace=self.workspace,
                project__key=project_key,
                status__in=(S.TODO, S.IN_PROGRESS),
            )
            .filter(~Exists(held))
            .order_by("id")
        )
        return sorted(rows, key=lambda issue: issue.status != S.IN_PROGRESS)

    def move(self, issue_id: int, to: str, *, by_human: bool) -> None:
        # Work handed in for review carries its completion report, as the rule asks.
        report = demo_report(issue_id) if to == S.IN_REVIEW else None
        workflow.transition_issue(
            workspace=self.workspace, issue_id=issue_id, to=to, by_human=by_human, report=report
        )

    def post(self, worker: Worker | None, scope: str, body: str) -> None:
        messages.post_message(
            workspace=self.workspace,
            scope=scope,
            body=body,
            session_id=worker.session_id if worker is not None else None,
        )


def demo_report(issue_id: int) -> dict[str, str]:
    return {
        "summary": f"Implemented issue {issue_id} as described.",
        "verification": "Unit tests added and the whole suite passes.",
        "pr_link": f"https://git.example.com/demo/pulls/{issue_id}",
    }
