"""The ready queue [get_ready_issues]: what to pick next, read off its partial index.

Every agent asks it before it claims, so it is SQL (``coordination.db.rows``):
as querysets, its count and a page of 100 issues with their leases, loaded, took 42 ms
on PostgreSQL over 10,000 issues, most of it building querysets and instances; as
these statements, 18 ms (in-process, profiled).
"""

from collections.abc import Sequence
from dataclasses import dataclass

from coordination.db.sql.base import (
    AGENT,
    ISSUE,
    LEASE,
    PROJECT,
    SESSION,
    WORKTREE,
    Dialect,
    Statement,
    columns,
    placeholders,
)
from coordination.db.sql.graph import (
    blocked,
    collides,
    collisions_json,
    links_json,
    paths_json,
)

# The definition of ready and the queue's rank exactly as the partial index
# ``issue_ready_queue_idx`` is built on them (``READY`` and ``READY_RANK`` of
# coordination.models.tracker): SQLite reads a query off a partial index only when
# the query's WHERE repeats the index's terms and its ORDER BY the index's expressions,
# literals included. READY: in ``todo``, with a title and a description that are not
# blank. RANK: urgent (1) first, then 2, 3, 4, and none (0) last.
READY = "i.status = 'todo' AND NOT (TRIM(i.title) = '') AND NOT (TRIM(i.description) = '')"
RANK = "CASE WHEN i.priority = 0 THEN 5 ELSE i.priority END"
ORDER = f"{RANK}, i.created_at, i.id"
INDEX = "issue_ready_queue_idx"


@dataclass(frozen=True)
class Queue:
    """Which queue: the workspace's, or one project's; the ready issues only or, with
    ``closed`` (the closed statuses), every issue not in those, the ready ones first.
    ``avoid_collisions``: within a priority, issues whose expected paths no live claim
    holds come first; ``free``: only those (invariant 16 (the work graph)'s queue; docs/api.md
    "The work graph", ready and free). Without either, the plain order, read off the
    partial index."""

    workspace_id: int
    project_id: int | None = None
    closed: Sequence[str] | None = None
    avoid_collisions: bool = False
    free: bool = False


def queue_filter(d: Dialect, queue: Queue, *, paged: bool = True) -> Statement:
    """The issues of the queue: without a live lease (invariant 2 (one live lease per issue): a dead
    holder's issue is free again, and so is an aged-out lease's, invariant 17 (stalled is derived)),
    of its project if it names one, ready and not blocked (invariant 16 (the work graph)), or open;
    with ``free``, colliding with no live claim. ``paged``: for a page, which stops at its end, not
    for the count, which looks at every issue."""
    live_lease = (
        f"SELECT 1 FROM {LEASE} held JOIN {SESSION} hs ON hs.id = held.session_id"
        f" WHERE held.issue_id = i.id AND held.released_at IS NULL"
        f" AND {d.lease_live('held', 'hs')}"
    )
    where = f"i.workspace_id = %s AND NOT EXISTS ({live_lease})"
    params: list[object] = [queue.workspace_id]
    if queue.project_id is not None:
        where += " AND i.project_id = %s"
        params.append(queue.project_id)
    if queue.closed is not None:
        where += f" AND i.status NOT IN ({placeholders(queue.closed)})"
        params += list(queue.closed)
        if queue.free:
            where += f" AND NOT {collides(d, 'i')}"
    elif queue.free:
        # Paths are checked only for the issues left once the blocked ones are out: a
        # CASE is evaluated in order on both databases, where two terms let
        # PostgreSQL check every ready issue's paths first.
        fence = " OFFSET 0" if paged and d.postgres else ""
        where += f" AND {READY} AND CASE WHEN {blocked('i', fence=fence)} THEN 0"
        where += f" WHEN {collides(d, 'i')} THEN 0 ELSE 1 END = 1"
    else:
        where += f" AND {READY} AND NOT {blocked('i')}"
    return where, params


def queue_issues(d: Dialect, queue: Queue) -> str:
    """The FROM item: for the ready issues only, on SQLite, named by their partial
    index. Without statistics (no ANALYZE) SQLite's planner may prefer the
    workspace's index and test every issue of the workspace (10,000 of them: 8.5 ms a
    count, against 2.4 ms off the partial index)."""
    return f"{ISSUE} i" + (d.sqlite_only(f"INDEXED BY {INDEX}") if queue.closed is None else "")


def queue_count(d: Dialect, queue: Queue) -> Statement:
    """How many issues ``queue_page`` pages through (for the ready issues only, read
    off the partial index: on PostgreSQL, an index-only scan)."""
    where, params = queue_filter(d, queue, paged=False)
    return f"SELECT COUNT(*) FROM {queue_issues(d, queue)} WHERE {where}", params


def queue_window(d: Dialect, queue: Queue, *, limit: int, offset: int) -> Statement:
    """Every column of the page's issues, in the queue's order: for the ready issues
    only, read off the partial index in that order up to the page's end."""
    where, params = queue_filter(d, queue)
    shown = ", ".join([columns(ISSUE, "i"), *queue_keys(d, queue)])
    return (
        f"SELECT {shown} FROM {queue_issues(d, queue)} WHERE {where}"
        f" ORDER BY {queue_order(queue)} LIMIT %s OFFSET %s",
        [*params, limit, offset],
    )


def queue_keys(d: Dialect, queue: Queue) -> list[str]:
    """The window's sort keys beyond rank and age, as columns: the page orders its
    rows by them again without a second look at the issues' paths and blockers."""
    keys = []
    if queue.closed is not None:
        keys.append(f"CASE WHEN {READY} AND NOT {blocked('i')} THEN 0 ELSE 1 END AS queue_ready")
    if queue.avoid_collisions and not queue.free:
        keys.append(f"CASE WHEN {collides(d, 'i')} THEN 1 ELSE 0 END AS queue_collides")
    return keys


def queue_order(queue: Queue) -> str:
    """Rank, then (avoiding collisions) the issues that collide with none first, then
    age. With a collision term the database still reads the index in rank order and
    checks and sorts each rank's issues only, up to the page's end: the ranks before
    it and the one it ends in. The keys of ``queue_keys`` by name."""
    order = ORDER
    if queue.avoid_collisions and not queue.free:
        order = f"{RANK}, queue_collides, i.created_at, i.id"
    if queue.closed is None:
        return order
    return f"queue_ready, {order}"


def queue_page(d: Dialect, queue: Queue, *, limit: int, offset: int) -> Statement:
    """A page of the queue in its order, each issue with every column of its project,
    worktree and assignee (``NULL``s for none) and of its unreleased lease (one at
    most, invariant 2 (one live lease per issue): a dead holder's), whether the lease's holder is
    live (invariant 1 (liveness)) and the lease's agent: what the API shows of a queued issue, in
    one statement.

    The page is chosen first, in a subquery, and joined after: planning the nine
    tables' joins at once cost PostgreSQL 6 ms a page, the page and then its joins 2
    (its 100 rows are sorted again: joins keep no order).

    Each issue brings its graph as JSON columns (``sql.graph``): its links both ways,
    its expected paths, and its collisions with live claims, the last one statement
    for the whole page by index range scans (invariant 16 (the work graph))."""
    window, params = queue_window(d, queue, limit=limit, offset=offset)
    shown = [
        columns(ISSUE, "i"),
        columns(PROJECT, "p"),
        columns(WORKTREE, "wt"),
        columns(AGENT, "a"),
        columns(LEASE, "l"),
        f"({d.live('ls')} AND {d.young('l')})",
        columns(AGENT, "la"),
        links_json(d, "i"),
        paths_json(d, "i"),
        collisions_json(d, "i"),
    ]
    return (
        f"SELECT {', '.join(shown)} FROM ({window}) i JOIN {PROJECT} p ON p.id = i.project_id"
        f" LEFT JOIN {WORKTREE} wt ON wt.id = i.worktree_id"
        f" LEFT JOIN {AGENT} a ON a.id = i.assignee_id"
        f" LEFT JOIN {LEASE} l ON l.issue_id = i.id AND l.released_at IS NULL"
        f" LEFT JOIN {SESSION} ls ON ls.id = l.session_id"
        f" LEFT JOIN {AGENT} la ON la.id = l.agent_id"
        f" ORDER BY {queue_order(queue)}",
        params,
    )
