"""The scripted agent's plan for the demo's issues (``demo.workbench``'s format), and
the issues made ready for real runners.

Each open issue of the demo workspace gets a plan entry under its server id: the files
it names (its expected paths; drawn from its project's files when it names none, and
then given to it), now and then an undeclared edit of a hot spot that other issues want
too (the hook claims it at edit time, or the agent edits another file), how long it
works, and, rarely, a crash on its first attempt or a long idle past the server's stall
threshold. Every open issue is made a filesystem issue on no fixed worktree, so each
runner works it on a branch in its agent's own worktree. The agents' tests hold one of
the test databases (``world.TEST_DB``), which a demo seeded before there were any is given.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from coordination.models import Issue, Resource, Workspace
from coordination.services import graph, projects, resources
from demo import world
from demo.fleet.place import HOT, files_for
from demo.workbench.plan import Plan, PlanIssue

OPEN = (Issue.Status.BACKLOG, Issue.Status.TODO, Issue.Status.IN_PROGRESS, Issue.Status.IN_REVIEW)


IDLE_PAST_THRESHOLD = 1.6  # an idle agent's rest, in stall thresholds


@dataclass(frozen=True)
class Pacing:
    """How the scripted agent works the demo's issues."""

    seconds: tuple[float, float] = (8.0, 60.0)  # an issue's work, spread between its edits
    crash_chance: float = 0.1  # the first attempt crashes (exit 1 or SIGKILL)
    idle_chance: float = 0.03  # it sits idle past the stall threshold, twice
    stall_after: float = 1800.0  # the server's PROJEKTOR_STALL_AFTER_SECONDS
    extra_chance: float = 0.4  # an undeclared edit of a hot spot


def entry(
    issue_id: int, title: str, project: str, paths: Iterable[str], pacing: Pacing
) -> PlanIssue:
    """The same issue gets the same behaviour, run after run."""
    rng = random.Random(f"demo-plan:{issue_id}")
    declared = sorted({file for path in paths for file in files_for(path)})
    spec = world.PROJECTS_BY_KEY.get(project)
    own = world.area_files(spec)[0] if spec else []
    extra: list[str] = []
    alternatives: list[str] = []
    spots = [path for path, _ in spec.hot_spots] if spec else list(world.HOT_SPOTS)
    spare = [path for path in own if path not in declared]
    if rng.random() < pacing.extra_chance and spare:
        spot = rng.choice([path for path in spots if path not in declared] or spots)
        if spot not in declared:
            extra, alternatives = [spot], [rng.choice(spare)]
    seconds = rng.uniform(*pacing.seconds)
    if rng.random() < pacing.idle_chance:
        # One edit, with a rest before and after it (the agent spreads its time evenly),
        # each outlasting the threshold: shown stalled twice, near each rest's end.
        declared, extra, alternatives = declared[:1], [], []
        seconds = 2 * IDLE_PAST_THRESHOLD * pacing.stall_after
    steps = len(declared) + len(extra)
    crash = rng.choice(["exit", "sigkill"]) if rng.random() < pacing.crash_chance else None
    return PlanIssue(
        key=issue_id,
        id=issue_id,
        title=title,
        description="",
        paths=declared,
        extra=extra,
        alternatives=alternatives,
        blocked_by=[],
        work_seconds=round(seconds, 2),
        crash=crash,
        crash_after=1 if steps > 1 else 0,
    )


def footprint(issue: Issue) -> list[str]:
    """Files for an issue that names none: a few of its project's own."""
    spec = world.PROJECTS_BY_KEY.get(issue.project.key)
    if spec is None:
        return ["README.md"]
    return list(world.draw_footprint(random.Random(f"demo-paths:{issue.pk}"), spec))


class DemoPlan:
    """The plan file the fleet's agents read, rewritten whole on each change."""

    def __init__(self, path: Path, pacing: Pacing, ttl: float) -> None:
        self.path, self.pacing = path, pacing
        self.plan = Plan(seed=0, base="main", ttl=ttl, hot=HOT)

    def add(self, issue_id: int, title: str, project: str, paths: Iterable[str]) -> PlanIssue:
        planned = entry(issue_id, title, project, paths, self.pacing)
        self.plan.issues = [i for i in self.plan.issues if i.id != issue_id] + [planned]
        return planned

    def save(self) -> None:
        self.plan.save(self.path)

    def files(self) -> set[str]:
        return {path for issue in self.plan.issues for path in [*issue.paths, *issue.extra]}


def prepare(workspace: Workspace, plan: DemoPlan) -> int:
    """Every open issue of the fleet's projects into the plan, named paths and a
    filesystem run on the agent's own worktree; the number of issues planned. The
    caller saves the plan. The tour's project is a person's, left as it is."""
    ensure_test_databases(workspace)
    issues = Issue.objects.filter(
        workspace=workspace, status__in=OPEN, project__key__in=world.PROJECTS_BY_KEY
    ).select_related("project")
    count = 0
    for issue in issues.order_by("pk"):
        paths = graph.expected_paths(issue)
        changes: dict[str, object] = {}
        if not paths:
            paths = footprint(issue)
            changes["paths"] = paths
        if not issue.requires_filesystem:
            changes["requires_filesystem"] = True
        if issue.worktree_id is not None:
            changes["worktree"] = None
        if changes:
            projects.update_issue(workspace=workspace, issue=issue, fields=changes)
        plan.add(issue.pk, issue.title, issue.project.key, paths)
        count += 1
    return count


def ensure_test_databases(workspace: Workspace) -> None:
    """The resource the agents' tests hold, as ``seed_demo`` makes it."""
    if not Resource.objects.filter(workspace=workspace, name=world.TEST_DB).exists():
        resources.create_resource(
            workspace=workspace,
            name=world.TEST_DB,
            capacity=world.TEST_DB_CAPACITY,
            description=world.TEST_DB_DESCRIPTION,
        )
