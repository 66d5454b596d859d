"""The code heatmap: events per path prefix, counted in the database.

Two questions, one shape. *Claims* mode counts file claims made in the window
(released or not, by ``claimed_at``); *contention* mode counts ``claim_conflicts``
rows (forced or not, by ``occurred_at``). The window is ``since <= t < until``.
Prefixes match whole segments: ``a`` holds ``a/x`` but not ``ab/x``.

How it is counted: one ``GROUP BY`` on the path cut to ``prefix + depth``
segments, so the database returns at most one row per distinct prefix at the
deepest level (never one row per event); the shallower levels are sums of those
rows, added up here.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from django.db.models import BooleanField, Count, ExpressionWrapper, F, Q, QuerySet

from coordination.filtersets import under_prefix
from coordination.models import ClaimConflict, FileClaim, Project, Workspace
from coordination.paths import normalise_prefix as path_prefix
from heatmap.paths import PathHead

Mode = Literal["claims", "contention"]
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


def events(
    workspace: Workspace,
    *,
    mode: Mode,
    since: datetime,
    until: datetime,
    project: Project | None = None,
    prefix: str = "",
) -> QuerySet[Any]:
    """The events of ``mode`` in the window, under ``prefix`` (already normalised)."""
    rows: QuerySet[Any]
    if mode == "claims":
        rows = FileClaim.objects.filter(
            workspace=workspace, claimed_at__gte=since, claimed_at__lt=until
        )
        if project is not None:
            rows = rows.filter(issue__project=project)
    else:
        rows = ClaimConflict.objects.filter(
            workspace=workspace, occurred_at__gte=since, occurred_at__lt=until
        )
        if project is not None:
            rows = rows.filter(rejected_issue__project=project)
    if prefix:  # whole segments: the prefix itself, or anything under "<prefix>/"
        rows = under_prefix(rows, "path", prefix)
    return rows


def prefix_counts(
    workspace: Workspace,
    *,
    mode: Mode,
    since: datetime,
    until: datetime,
    project: Project | None = None,
    prefix: str = "",
    depth: int = DEFAULT_DEPTH,
) -> QuerySet[Any]:
    """``(head, deeper, count, files)`` rows: the events grouped by their path cut
    ``depth`` segments below ``prefix``, whether any path went on below the cut, and
    how many distinct paths each group holds."""
    base = len(prefix.split("/")) if prefix else 0
    return (
        events(workspace, mode=mode, since=since, until=until, project=project, prefix=prefix)
        .annotate(head=PathHead("path", base + depth))
        .annotate(deeper=ExpressionWrapper(~Q(path=F("head")), output_field=BooleanField()))
        .values_list("head", "deeper")
        .annotate(count=Count("*"), files=Count("path", distinct=True))
        .order_by()
    )


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
    grouped = prefix_counts(
        workspace,
        mode=mode,
        since=since,
        until=until,
        project=project,
        prefix=prefix,
        depth=depth,
    )
    total, nodes = roll_up(grouped, base=len(prefix.split("/")) if prefix else 0)
    return Heatmap(
        mode=mode,
        since=since,
        until=until,
        prefix=prefix,
        depth=depth,
        project=project,
        total=total,
        nodes=nodes,
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
    rows = (
        events(workspace, mode=mode, since=since, until=until, project=project, prefix=prefix)
        .values_list("path")
        .annotate(count=Count("*"))
        .order_by("-count", "path")[:limit]
    )
    return [(path, count) for path, count in rows]


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
