"""An issue's place in the work graph, as the issue shape shows it (invariant 16 (the work graph)):
its unresolved blockers, what it blocks, its parent, its children's progress, its
links both ways, its expected paths and, in the ready queue, its collisions.

The statements that read issues carry the graph as JSON columns (``sql.graph``);
``graph_of`` reads them off the issue, or, for an issue read without them (one a
service returned), asks the database for that one issue.
"""

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db.models import QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from coordination.db.rows import dialect
from coordination.db.sql.graph import collisions_json, links_json, paths_json
from coordination.models import Issue, LinkType

RESOLVED = frozenset(Issue.CLOSED_STATUSES)


@dataclass(frozen=True)
class Link:
    id: int
    type: str
    source: int
    target: int
    created_at: datetime | None
    other_status: str
    other_title: str


@dataclass(frozen=True)
class Collision:
    path: str
    held_path: str
    issue: int
    agent: str | None


@dataclass
class Graph:
    issue_id: int
    links: list[Link] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    collisions: list[Collision] = field(default_factory=list)

    def other(self, link: Link) -> int:
        return link.target if link.source == self.issue_id else link.source

    def of_type(self, type: str, *, incoming: bool) -> list[Link]:
        """The links of ``type`` to this issue (``incoming``) or from it."""
        end = "target" if incoming else "source"
        return [
            link for link in self.links if link.type == type and getattr(link, end) == self.issue_id
        ]

    @property
    def blocker_links(self) -> list[Link]:
        """Every ``blocks`` link to this issue, resolved or not (the other end's status
        says which)."""
        return self.of_type(LinkType.BLOCKS, incoming=True)

    @property
    def blocking_links(self) -> list[Link]:
        return self.of_type(LinkType.BLOCKS, incoming=False)

    @property
    def child_links(self) -> list[Link]:
        return self.of_type(LinkType.PARENT_OF, incoming=False)

    @property
    def parent_link(self) -> Link | None:
        parents = self.of_type(LinkType.PARENT_OF, incoming=True)
        return parents[0] if parents else None

    @property
    def related_links(self) -> list[Link]:
        return [
            link for link in self.links if link.type not in (LinkType.BLOCKS, LinkType.PARENT_OF)
        ]

    @property
    def blocked_by(self) -> list[dict[str, Any]]:
        """The unresolved blockers, ``{"id", "title", "status"}`` each, by id."""
        return [
            {"id": link.source, "title": link.other_title, "status": link.other_status}
            for link in self.links
            if link.type == LinkType.BLOCKS
            and link.target == self.issue_id
            and link.other_status not in RESOLVED
        ]

    @property
    def blocks(self) -> list[int]:
        return [
            link.target
            for link in self.links
            if link.type == LinkType.BLOCKS and link.source == self.issue_id
        ]

    @property
    def parent(self) -> int | None:
        for link in self.links:
            if link.type == LinkType.PARENT_OF and link.target == self.issue_id:
                return link.source
        return None

    @property
    def children(self) -> dict[str, int]:
        statuses = [
            link.other_status
            for link in self.links
            if link.type == LinkType.PARENT_OF and link.source == self.issue_id
        ]
        return {"total": len(statuses), "done": sum(s in RESOLVED for s in statuses)}


def decoded(value: Any) -> list[Any]:
    """A JSON column: PostgreSQL's driver decodes it, SQLite's gives text."""
    if value is None:
        return []
    return json.loads(value) if isinstance(value, str | bytes) else list(value)


def moment(value: Any) -> datetime | None:
    """A timestamp inside JSON: ISO text from PostgreSQL, SQLite's stored text (UTC)."""
    if not value:
        return None
    parsed = parse_datetime(str(value))
    if parsed is not None and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    return parsed


def graph_from(issue_id: int, links: Any, paths: Any, collisions: Any = None) -> Graph:
    return Graph(
        issue_id=issue_id,
        links=sorted(
            (
                Link(int(i), t, int(s), int(g), moment(at), status, title)
                for i, t, s, g, at, status, title in decoded(links)
            ),
            key=lambda link: link.id,
        ),
        paths=sorted(path for (path,) in decoded(paths)),
        collisions=sorted(
            (Collision(p, h, int(i), a) for p, h, i, a in decoded(collisions)),
            key=lambda c: (c.path, c.held_path, c.issue),
        ),
    )


def with_graph(issues: QuerySet[Issue], *, collisions: bool = False) -> QuerySet[Issue]:
    """Each issue with its links and expected paths and, with ``collisions``, its
    expected paths that another issue's held claim holds now (the board's mark), in
    the statement that reads it."""
    d = dialect()
    table = Issue._meta.db_table
    shown = issues.annotate(
        graph_links=RawSQL(links_json(d, table), []),
        graph_paths=RawSQL(paths_json(d, table), []),
    )
    if collisions:
        shown = shown.annotate(graph_collisions=RawSQL(collisions_json(d, table), []))
    return shown


def attach(issue: Issue, row: Any, at: int) -> None:
    """The graph columns of a ``sql.queue_page`` row, from ``at`` on."""
    issue.graph = graph_from(issue.pk, row[at], row[at + 1], row[at + 2])  # type: ignore[attr-defined]


def graph_of(issue: Issue) -> Graph:
    """The issue's graph, as its statement brought it or, failing that, read now."""
    known = getattr(issue, "graph", None)
    if known is not None:
        return known  # type: ignore[no-any-return]
    if not hasattr(issue, "graph_links"):
        d = dialect()
        table = Issue._meta.db_table
        loaded = (
            Issue.objects.filter(pk=issue.pk)
            .annotate(
                links=RawSQL(links_json(d, table), []),
                paths=RawSQL(paths_json(d, table), []),
            )
            .values_list("links", "paths")
            .first()
        )
        issue.graph_links, issue.graph_paths = loaded or (None, None)  # type: ignore[attr-defined]
    collisions = getattr(issue, "graph_collisions", None)
    graph = graph_from(issue.pk, issue.graph_links, issue.graph_paths, collisions)  # type: ignore[attr-defined]
    issue.graph = graph  # type: ignore[attr-defined]
    return graph
