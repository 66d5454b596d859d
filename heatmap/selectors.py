"""The code heatmap: events per path prefix, counted in the database.

Two questions, one shape. *Claims* mode counts file claims made in the window
(released or not, by ``claimed_at``); *contention* mode counts ``claim_conflicts``
rows (forced or not, by ``occurred_at``). The window is ``since <= t < until``.
Prefixes match whole segments: ``a`` holds ``a/x`` but not ``ab/x``.

How it is counted: the events per path in the window, whole days from the daily
rollups and the partial days at its ends from the rows (``heatmap.rollups``), in one
query that returns one row per path counted (never one per event); they are grouped
here by the path cut to ``prefix + depth`` segments, and the shallower levels are
sums of those groups.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Q

from coordination.models import Project, Workspace
from coordination.paths import normalise_prefix as path_prefix
from heatmap.paths import path_head
from heatmap.raw import Mode, events
from heatmap.rollups import path_counts

__all__ = ["Mode", "events"]  # the rows, for the pages' stories and pairs
MODES: tuple[Mode, ...] = ("claims", "contention")
MAX_DEPTH = 8
DEFAULT_DEPTH = 2


@dataclass(frozen=True)
class Node:
    path: str
    count: int
    depth: int  # segments below the prefix
    is_dir: bool  # some counted path lies below it: worth drilling into
    files: int = 1  # distinct paths counted under it: its heat is ``count / files``

    @property
    def heat(self) -> float:
        """Events per file below it: a big directory of cold files stays cold."""
        return self.count / max(self.files, 1)

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "count": self.count, "depth": self.depth}


@dataclass(frozen=True)
class Heatmap:
    mode: Mode
    since: datetime
    until: datetime
    prefix: str
    depth: int
    project: Project | None
    total: int
    nodes: list[Node] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict, repr=False)  # events per path

    def hottest(self, limit: int = 15) -> list[tuple[str, int]]:
        """The single paths with the most events: ``hottest_paths`` of the same query."""
        return most(self.counts, limit)

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "since": self.since,
            "until": self.until,
            "prefix": self.prefix,
            "depth": self.depth,
            "total": self.total,
            "nodes": [node.as_dict() for node in self.nodes],
        }


def normalise_prefix(raw: str | None) -> str:
    """``""`` (or nothing) is the root; anything else goes through the claims' own
    normaliser, so a prefix is spelled like the paths it matches (bad one: 400); a
    directory's trailing ``/`` is dropped (``src/`` is the prefix ``src``)."""
    return path_prefix(raw) if raw else ""


def grouped_by_head(
    counts: dict[str, int], *, base: int, depth: int
) -> list[tuple[str, bool, int, int]]:
    """``(head, deeper, count, files)`` rows: the paths' counts grouped by their path
    cut ``depth`` segments below the prefix's ``base`` segments, whether any path went
    on below the cut, and how many distinct paths each group holds."""
    groups: dict[str, list[int]] = {}
    deeper: dict[str, bool] = defaultdict(bool)
    for path, count in counts.items():
        head = path_head(path, base + depth)
        group = groups.setdefault(head, [0, 0])
        group[0] += count
        group[1] += 1
        deeper[head] |= path != head
    return [(head, deeper[head], count, files) for head, (count, files) in groups.items()]


def code_heatmap(
    workspace: Workspace,
    *,
    mode: Mode,
    since: datetime,
    until: datetime,
    project: Project | None = None,
    prefix: str = "",
    depth: int = DEFAULT_DEPTH,
) -> Heatmap:
    """Each prefix up to ``depth`` segments below ``prefix``, with its event count."""
    counts = path_counts(
        workspace, mode=mode, since=since, until=until, project=project, prefix=prefix
    )
    base = len(prefix.split("/")) if prefix else 0
    total, nodes = roll_up(grouped_by_head(counts, base=base, depth=depth), base=base)
    return Heatmap(
        mode=mode,
        since=since,
        until=until,
        prefix=prefix,
        depth=depth,
        project=project,
        total=total,
        nodes=nodes,
        counts=counts,
    )


def roll_up(grouped: Iterable[tuple[str, bool, int, int]], *, base: int) -> tuple[int, list[Node]]:
    """Sum the deepest prefixes' counts (and files) into every shallower prefix below
    ``base``.

    ``grouped`` rows are ``(head, deeper, count, files)``: a path cut to the deepest
    level, whether some of its paths went on below the cut, how many events, and how
    many distinct paths (the groups are disjoint, so their files add up exactly).
    """
    counts: dict[str, int] = defaultdict(int)
    files: dict[str, int] = defaultdict(int)
    is_dir: dict[str, bool] = defaultdict(bool)
    total = 0
    for head, deeper, count, distinct in grouped:
        total += count
        segments = head.split("/")
        for end in range(base + 1, len(segments) + 1):
            node = "/".join(segments[:end])
            counts[node] += count
            files[node] += distinct
            is_dir[node] |= end < len(segments) or bool(deeper)
    nodes = [
        Node(
            path=path,
            count=count,
            depth=len(path.split("/")) - base,
            is_dir=is_dir[path],
            files=files[path],
        )
        for path, count in counts.items()
    ]
    nodes.sort(key=lambda node: (-node.count, node.path))
    return total, nodes


def hottest_paths(
    workspace: Workspace,
    *,
    mode: Mode,
    since: datetime,
    until: datetime,
    project: Project | None = None,
    prefix: str = "",
    limit: int = 15,
) -> list[tuple[str, int]]:
    """The single paths with the most events under ``prefix``."""
    counts = path_counts(
        workspace, mode=mode, since=since, until=until, project=project, prefix=prefix
    )
    return most(counts, limit)


def most(counts: dict[str, int], limit: int) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit]


@dataclass(frozen=True)
class IssuePair:
    rejected_id: int
    rejected_title: str
    holding_id: int
    holding_title: str
    count: int
    forced: int


def colliding_pairs(
    workspace: Workspace,
    *,
    since: datetime,
    until: datetime,
    project: Project | None = None,
    prefix: str = "",
    limit: int = 10,
) -> list[IssuePair]:
    """Rejected issue × holding issue, by how many contested paths they shared."""
    rows = (
        events(
            workspace, mode="contention", since=since, until=until, project=project, prefix=prefix
        )
        .values_list(
            "rejected_issue_id",
            "rejected_issue__title",
            "holding_issue_id",
            "holding_issue__title",
        )
        .annotate(count=Count("*"), forced=Count("pk", filter=Q(forced=True)))
        .order_by("-count", "rejected_issue_id", "holding_issue_id")[:limit]
    )
    return [IssuePair(*row) for row in rows]
