"""The landing queue as the managers' pages show it (invariant 21 (the default branch is
always green)): each project's queue now and who tests its batch, what landed and what
was rejected per day with the waits, how many times the queue moved the default branch
and how many of those moves no reported check proves green, and an issue's entries.

Reads only, a fixed handful of statements however many entries: the queues now (two,
``coordination.selectors.landing_stats``), the projects, and the entries that finished
in the window, whose waits' percentiles are taken here from the rows (the same on
SQLite and PostgreSQL).
"""

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from coordination.models import Issue, Landing, Project, Workspace
from coordination.selectors import landing_stats
from coordination.selectors.landing_stats import QueueNow

REASONS = tuple(Landing.Reason.values)  # conflict, check_failed, stale_fence
DETAIL_LINES = 15  # a rejection's detail: its last lines on the issue page


def percentile(values: list[float], share: float) -> float | None:
    """The nearest-rank percentile (``share`` of 1) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)), 1) - 1]


def wait_words(seconds: float | None) -> str:
    """``45 s``, ``12 min``, ``3 h 05``, ``2 d 04 h``; ``—`` for none."""
    if seconds is None:
        return "—"
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d}"
    return f"{whole // 86400} d {whole % 86400 // 3600:02d} h"


@dataclass
class Finished:
    """Entries that finished (a day's, or the window's): landed, rejected by reason, and
    their waits (queued to finished, in seconds); and the default branch's moves.

    A tester moves the default branch once per batch, to the commit of the last entry it
    lands, and only after that exact tree passed the check; then it reports each landed
    entry with its commit, under the batch's fence. So a move is a fence among the landed
    entries (an entry without one is a move of its own), and a move is proved green by
    the commit its tester reported; one with an entry reported without a commit is
    counted unproved (``red``), which invariant 21 (the default branch is always green)
    says never happens."""

    landed: int = 0
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    waits: list[float] = field(default_factory=list)
    moves: set[tuple[str, int]] = field(default_factory=set)
    unproved: set[tuple[str, int]] = field(default_factory=set)

    def add(
        self,
        state: str,
        reason: str,
        wait: float,
        *,
        entry: int = 0,
        fence: int | None = None,
        landed_commit: str = "",
    ) -> None:
        if state == Landing.State.LANDED:
            self.landed += 1
            move = ("fence", fence) if fence is not None else ("entry", entry)
            self.moves.add(move)
            if not landed_commit:
                self.unproved.add(move)
        else:
            self.rejected[reason] = self.rejected.get(reason, 0) + 1
        self.waits.append(wait)

    @property
    def moved(self) -> int:
        return len(self.moves)

    @property
    def red(self) -> int:
        return len(self.unproved)

    @property
    def branch_words(self) -> str:
        """The default branch's moves by the queue, said plainly: ``Default branch moved 3
        times in this window (5 entries landed), each to a tree that passed the check (red:
        0)``."""
        if not self.moved:
            return "Default branch not moved by the queue in this window (red: 0)"
        entries = f"{self.landed} entr{'y' if self.landed == 1 else 'ies'} landed"
        if self.moved == 1:
            moved, each = f"moved once in this window ({entries})", "to a tree"
        else:
            moved, each = f"moved {self.moved} times in this window ({entries})", "each to a tree"
        if not self.red:
            return f"Default branch {moved}, {each} that passed the check (red: 0)"
        return (
            f"Default branch {moved}; {self.red} of them to a tree that no reported check "
            f"proves green (red: {self.red})"
        )

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())

    @property
    def p50(self) -> str:
        return wait_words(percentile(self.waits, 0.5))

    @property
    def p95(self) -> str:
        return wait_words(percentile(self.waits, 0.95))


@dataclass
class LandingDay:
    day: date
    project: Project
    finished: Finished


@dataclass
class ProjectQueue:
    project: Project
    now: QueueNow
    finished: Finished  # in the window


@dataclass
class LandingsNow:
    projects: list[ProjectQueue]  # with open entries, or entries finished in the window
    days: list[LandingDay]  # newest first; a day and project with something finished

    @property
    def depth(self) -> int:
        return sum(queue.now.depth for queue in self.projects)


def landings_now(workspace: Workspace, since: datetime, until: datetime) -> LandingsNow:
    """Every project whose queue holds entries now or finished some in the window."""
    queues = landing_stats.queues_now(workspace)
    per_day: dict[tuple[date, int], Finished] = defaultdict(Finished)
    per_project: dict[int, Finished] = defaultdict(Finished)
    for number, row in enumerate(landing_stats.finished_between(workspace, since, until)):
        project_id, state, reason, queued_at, finished_at, fence, landed_commit = row
        wait = (finished_at - queued_at).total_seconds()
        day = finished_at.date()  # a UTC day
        for finished in (per_day[(day, project_id)], per_project[project_id]):
            finished.add(
                state, reason, wait, entry=number, fence=fence, landed_commit=landed_commit
            )
    shown = set(queues) | set(per_project)
    if not shown:
        return LandingsNow(projects=[], days=[])
    projects = {
        project.pk: project
        for project in Project.objects.filter(workspace=workspace, pk__in=shown).order_by("key")
    }
    return LandingsNow(
        projects=[
            ProjectQueue(
                project=project,
                now=queues.get(pk) or QueueNow(project_id=pk, depth=0, testing=0),
                finished=per_project[pk],
            )
            for pk, project in projects.items()
        ],
        days=[
            LandingDay(day=day, project=projects[project_id], finished=finished)
            for (day, project_id), finished in sorted(
                per_day.items(),
                key=lambda item: (-item[0][0].toordinal(), projects[item[0][1]].key),
            )
            if project_id in projects
        ],
    )


@dataclass(frozen=True)
class IssueLandings:
    """An issue's entries, newest first, and its open one (``current``), if any."""

    entries: list[Any]

    @property
    def current(self) -> Landing | None:
        return next((entry for entry in self.entries if entry.is_open), None)


def issue_landings(workspace: Workspace, issue: Issue) -> IssueLandings:
    return IssueLandings(entries=landing_stats.issue_entries(workspace, issue))


def detail_tail(detail: str, lines: int = DETAIL_LINES) -> str:
    """A rejection's detail's last ``lines`` lines (the check's output ends with why)."""
    return "\n".join(detail.rstrip().splitlines()[-lines:])
