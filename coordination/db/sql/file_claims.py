"""File claims: path locks, overlapping holders, inserts, the conflict log, releases."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from coordination.db.sql.base import (
    AGENT,
    CLAIM,
    COLUMNS,
    CONFLICT,
    EVENT,
    ISSUE,
    SESSION,
    Dialect,
    Statement,
    columns,
    placeholders,
)
from coordination.paths import overlap_probes


@dataclass(frozen=True)
class Overlap:
    """What requested paths overlap (invariant 11 (overlap)), as the statements look for it:
    ``exact``, the paths themselves and every directory above one (found by
    equality); ``lows`` and ``highs``, the bounds of each requested directory's
    subtree (found by one index range scan each: ``paths.subtree_bounds``)."""

    exact: list[str]
    lows: list[str]
    highs: list[str]


def overlap_of(paths: Iterable[str]) -> Overlap:
    exact, bounds = overlap_probes(paths)
    return Overlap(exact=exact, lows=[low for low, _ in bounds], highs=[high for _, high in bounds])


def ordered_locks(keyed: Iterable[tuple[int, bool]]) -> tuple[list[int], list[bool]]:
    """``(key, exclusive)`` pairs as ``path_locks`` takes them: ascending keys, each
    once, exclusive if any pair wants it so (a collision, or a path that is also a
    directory above another requested path)."""
    modes: dict[int, bool] = {}
    for key, exclusive in keyed:
        modes[key] = modes.get(key, False) or exclusive
    keys = sorted(modes)
    return keys, [modes[key] for key in keys]


def path_locks(*, namespace: int, keys: list[int], exclusive: list[bool]) -> Statement:
    """PostgreSQL only: transaction-scoped advisory locks, exclusive or shared, in the
    order of ``keys`` (invariants 5 (all-or-nothing) and 11 (overlap):
    ``coordination.services.file_claims.claim`` tells why overlapping claimers queue and disjoint
    ones do not)."""
    return (
        "SELECT CASE WHEN requested.exclusive THEN pg_advisory_xact_lock(%s, requested.key)"
        " ELSE pg_advisory_xact_lock_shared(%s, requested.key) END"
        " FROM unnest(%s::int[], %s::bool[]) WITH ORDINALITY"
        " AS requested(key, exclusive, position) ORDER BY position",
        [namespace, namespace, keys, exclusive],
    )


# FileClaim.Meta's indexes, for SQLite's INDEXED BY (tests pin the names to the model):
# the partial unique one, (workspace_id, path) WHERE released_at IS NULL, and
# (workspace_id, issue_id, released_at), as migration 0002 named it.
UNRELEASED_PATHS = "one_unreleased_claim_per_path"
ISSUE_CLAIMS = "issue_file__workspa_8cf362_idx"


def overlapping_ids(d: Dialect, *, workspace_id: int, overlap: Overlap) -> Statement:
    """A subquery: the ids of the unreleased claims that overlap ``overlap``'s paths.
    Index scans on ``one_unreleased_claim_per_path`` only (equality for the paths and
    the directories above them, a range per requested directory), so its cost follows
    what it finds, not how many claims are held or were ever held (invariant 11 (overlap))."""
    ranges, range_params = d.ranges("r", overlap.lows, overlap.highs)
    index = d.sqlite_only(f"INDEXED BY {UNRELEASED_PATHS}")
    return (
        f"SELECT e.id FROM {CLAIM} e{index} WHERE e.workspace_id = %s"
        f" AND e.released_at IS NULL AND {d.any_of('e.path')}"
        # CROSS JOIN: SQLite keeps the bounds as the outer loop (a range scan each),
        # never the claims.
        f" UNION ALL SELECT u.id FROM {ranges} CROSS JOIN {CLAIM} u{index}"
        " WHERE u.workspace_id = %s AND u.released_at IS NULL"
        " AND u.path > r.low AND u.path < r.high",
        [workspace_id, d.listed(overlap.exact), *range_params, workspace_id],
    )


def share_claim_issues(
    d: Dialect, *, workspace_id: int, issue_id: int, overlap: Overlap
) -> Statement:
    """PostgreSQL only: ``(id, status)`` of the claiming issue and of every issue
    holding a claim that overlaps the requested paths, ``FOR SHARE`` in id order.
    Found by primary key (``= ANY(ARRAY(...))``): written as ``id = %s OR id IN
    (...)`` it scanned the whole issue table."""
    ids, params = overlapping_ids(d, workspace_id=workspace_id, overlap=overlap)
    return (
        f"""
        SELECT id, status FROM {ISSUE}
        WHERE id = ANY(ARRAY(SELECT %s UNION ALL
                             SELECT issue_id FROM {CLAIM} WHERE {d.among("id", ids)}))
        ORDER BY id
        FOR SHARE
        """,
        [issue_id, *params],
    )


def claim_issue_status(*, issue_id: int) -> Statement:
    """SQLite's form of ``share_claim_issues``: only the claiming issue's status."""
    return f"SELECT id, status FROM {ISSUE} WHERE id = %s", [issue_id]


def overlapping_holders(
    d: Dialect, *, workspace_id: int, overlap: Overlap, lock: bool = True
) -> Statement:
    """The unreleased claims that overlap the requested paths, with their agent and
    whether their session is live, in path order; with ``lock``, row-locked in that
    order (invariants 5 (all-or-nothing) and 11 (overlap): what a claim classifies stays true until
    it commits; a row released while we waited for it is re-checked and left out)."""
    ids, params = overlapping_ids(d, workspace_id=workspace_id, overlap=overlap)
    return (
        f"SELECT {columns(CLAIM, 'c')}, {columns(AGENT, 'a')}, {d.live('s')}"
        # NOT INDEXED: by rowid, as the ids come (SQLite may otherwise walk an index of
        # every unreleased claim and test each against them).
        f" FROM {CLAIM} c{d.sqlite_only('NOT INDEXED')}"
        f" LEFT JOIN {SESSION} s ON s.id = c.session_id"
        f" LEFT JOIN {AGENT} a ON a.id = c.agent_id"
        f" WHERE c.released_at IS NULL AND {d.among('c.id', ids)}"
        f" ORDER BY c.path{d.lock('FOR UPDATE OF c') if lock else ''}",
        params,
    )


def release_dead_claims(d: Dialect, *, ids: list[int], reason: str) -> Statement:
    """Invariant 4 (stale reclaim), for every dead holder a claim found in one statement: release
    the claims among ``ids`` whose session is not live (compare-and-set: a holder
    revived by a heartbeat meanwhile is kept, and the caller sees it missing from
    the returned ids). A claim with no session is held until forced, never dead."""
    return (
        f"UPDATE {CLAIM} SET released_at = {d.now()}, release_reason = %s"
        f" WHERE id IN ({placeholders(ids)}) AND released_at IS NULL"
        " AND session_id IS NOT NULL AND NOT EXISTS ("
        f"SELECT 1 FROM {SESSION} s WHERE s.id = {CLAIM}.session_id AND {d.live('s')})"
        f" RETURNING path, issue_id, session_id, agent_id,"
        f" (SELECT project_id FROM {ISSUE} WHERE id = {CLAIM}.issue_id)",
        [reason, *ids],
    )


def insert_claims(
    d: Dialect,
    *,
    workspace_id: int,
    issue_id: int,
    session_id: int | None,
    agent_id: int | None,
    paths: list[str],
) -> Statement:
    """One unreleased claim per path (invariant 5 (all-or-nothing)). ON CONFLICT turns a path
    someone else holds into "no row" instead of an error that would abort the PostgreSQL
    transaction; the caller treats a missing row as a lost race."""
    rows = ", ".join([f"(%s, %s, %s, %s, %s, {d.now()}, '')"] * len(paths))
    params: list[Any] = []
    for path in paths:
        params += [workspace_id, issue_id, session_id, agent_id, path]
    return (
        f"INSERT INTO {CLAIM} (workspace_id, issue_id, session_id, agent_id, path,"
        f" claimed_at, release_reason) VALUES {rows}"
        " ON CONFLICT (workspace_id, path) WHERE released_at IS NULL DO NOTHING"
        f" RETURNING {', '.join(COLUMNS[CLAIM])}",
        params,
    )


@dataclass(frozen=True)
class ReleasedClaim:
    """A claim ``release_claims`` released: its path and who held it."""

    path: str
    issue_id: int
    session_id: int | None
    agent_id: int | None
    project_id: int | None = None


@dataclass(frozen=True)
class ConflictRow:
    """One contested path: who asked (rejected) and who held it (holding)."""

    path: str
    rejected_issue_id: int
    rejected_session_id: int | None
    rejected_agent_id: int | None
    holding_issue_id: int
    holding_session_id: int | None
    holding_agent_id: int | None


def insert_conflicts(
    d: Dialect,
    *,
    workspace_id: int,
    rows: list[ConflictRow],
    forced: bool,
    earlier_by: timedelta | None = None,
) -> Statement:
    """Invariants 5 (all-or-nothing) and 8 (append-only logs): one append-only ``claim_conflicts``
    row per contested path, in one INSERT (a refused claim holds its path locks until this
    commits), stamped now or ``earlier_by`` before it."""
    stamp = d.earlier(earlier_by)
    values = ", ".join([f"(%s, %s, %s, %s, %s, %s, %s, %s, %s, {stamp})"] * len(rows))
    params: list[Any] = []
    for row in rows:
        params += [
            workspace_id,
            row.path,
            row.rejected_issue_id,
            row.rejected_session_id,
            row.rejected_agent_id,
            row.holding_issue_id,
            row.holding_session_id,
            row.holding_agent_id,
            forced,
        ]
    return (
        f"INSERT INTO {CONFLICT} (workspace_id, path, rejected_issue_id, rejected_session_id,"
        " rejected_agent_id, holding_issue_id, holding_session_id, holding_agent_id, forced,"
        f" occurred_at) VALUES {values}",
        params,
    )


def release_claims(
    d: Dialect,
    *,
    reason: str,
    workspace_id: int | None = None,
    issue_id: int | None = None,
    session_id: int | None = None,
    paths: list[str] | None = None,
    ids: list[int] | None = None,
    holder_dead: bool = False,
) -> Statement:
    """Release the unreleased claims matching every given filter (with
    ``holder_dead``, only those whose session is not live: compare-and-set, so a
    holder revived by a heartbeat meanwhile keeps them), returning each one's
    ``ReleasedClaim`` columns (its holder, for the event log). On PostgreSQL the rows
    are locked in path order first, the order claimers lock them in, so a release and
    a claim of the same paths queue instead of deadlocking. SQLite locks no row and
    needs no order, and asked for one its planner walked the partial index of every
    unreleased claim of the workspace to avoid a sort (a cost that grows with the
    claims held, against invariant 11 (overlap)'s flat cost); it is told its index instead: the
    ids by rowid, paths by the partial index, an issue's claims by the issue index, a
    session's by the partial one."""
    conditions = ["released_at IS NULL"]
    params: list[Any] = []
    for column, value in (
        ("workspace_id", workspace_id),
        ("issue_id", issue_id),
        ("session_id", session_id),
    ):
        if value is not None:
            conditions.append(f"{column} = %s")
            params.append(value)
    for column, values in (("path", paths), ("id", ids)):
        if values is not None:
            conditions.append(f"{column} IN ({placeholders(values)})" if values else "1 = 0")
            params += values
    if holder_dead:
        conditions.append(
            f"session_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {SESSION} s"
            f" WHERE s.id = {CLAIM}.session_id AND {d.live('s')})"
        )
    if ids is not None:
        hint = "NOT INDEXED"
    elif workspace_id is not None:
        by_issue = issue_id is not None and paths is None
        hint = f"INDEXED BY {ISSUE_CLAIMS if by_issue else UNRELEASED_PATHS}"
    else:
        hint = ""
    return (
        f"UPDATE {CLAIM} SET released_at = {d.now()}, release_reason = %s"
        f" WHERE released_at IS NULL AND id IN (SELECT id FROM {CLAIM}"
        f"{d.sqlite_only(hint) if hint else ''}"
        f" WHERE {' AND '.join(conditions)}{d.lock('ORDER BY path FOR UPDATE')})"
        f" RETURNING path, issue_id, session_id, agent_id,"
        f" (SELECT project_id FROM {ISSUE} WHERE id = {CLAIM}.issue_id)",
        [reason, *params],
    )


def release_claims_announced(
    d: Dialect,
    *,
    reason: str,
    workspace_id: int,
    issue_id: int,
    session_id: int | None,
    paths: list[str] | None,
    event_type: str,
    lock: int,
) -> Statement:
    """PostgreSQL only: ``release_claims`` of one issue's claims and its events in one
    statement, which needs no transaction around it (``file_claims.release_files``).

    The rows are locked in path order and released as ``release_claims`` does; then,
    if any were, the workspace's event-writer lock is taken (shared, to the commit:
    ``insert_events``) and one event of ``event_type`` per holder is inserted, in the
    order and with the data ``events.claims_released`` gives (``paths`` sorted by code
    point, ``reason``), its ids drawn only once the lock is held (the rows join the
    lock's materialised CTE). Returns the released paths, sorted."""
    update, update_params = release_claims(
        d,
        reason=reason,
        workspace_id=workspace_id,
        issue_id=issue_id,
        session_id=session_id,
        paths=paths,
    )
    columns = "workspace_id, type, project_id, issue_id, session_id, agent_id, data, occurred_at"
    return (
        f"WITH released (path, issue_id, session_id, agent_id, project_id) AS ({update}),"
        " writer AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(%s, %s)"
        " WHERE EXISTS (SELECT 1 FROM released)),"
        " holders AS (SELECT issue_id, session_id, agent_id, project_id,"
        ' jsonb_agg(path ORDER BY path COLLATE "C") AS paths FROM released'
        " GROUP BY issue_id, session_id, agent_id, project_id),"
        f" announced AS (INSERT INTO {EVENT} ({columns})"
        " SELECT %s, %s, holder.project_id, holder.issue_id, holder.session_id,"
        " holder.agent_id, jsonb_build_object('paths', holder.paths, 'reason', %s::text),"
        f" {d.now()} FROM writer CROSS JOIN holders AS holder"
        " ORDER BY holder.issue_id, COALESCE(holder.session_id, 0))"
        ' SELECT path FROM released ORDER BY path COLLATE "C"',
        [*update_params, lock, workspace_id, workspace_id, event_type, reason],
    )
