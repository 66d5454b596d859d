"""File claims: path locks, holders, inserts, the conflict log, releases."""

from dataclasses import dataclass
from typing import Any

from coordination.services.sql.base import (
    AGENT,
    CLAIM,
    COLUMNS,
    CONFLICT,
    ISSUE,
    SESSION,
    Dialect,
    Statement,
    columns,
    placeholders,
)


def advisory_locks(*, namespace: int, keys: list[int]) -> Statement:
    """PostgreSQL only: transaction-scoped advisory locks, in the order of ``keys``
    (invariant 5: claimers of overlapping sets queue path by path)."""
    return (
        "SELECT pg_advisory_xact_lock(%s, key)"
        " FROM unnest(%s::int[]) WITH ORDINALITY AS requested(key, position)"
        " ORDER BY position",
        [namespace, keys],
    )


def share_claim_issues(*, workspace_id: int, issue_id: int, paths: list[str]) -> Statement:
    """PostgreSQL only: ``(id, status)`` of the claiming issue and of every issue
    holding one of ``paths``, ``FOR SHARE`` in id order. Found by primary key
    (``= ANY(ARRAY(...))``): written as ``id = %s OR id IN (...)`` it scanned the
    whole issue table."""
    return (
        f"""
        SELECT id, status FROM {ISSUE}
        WHERE id = ANY(ARRAY(SELECT %s UNION ALL
                             SELECT issue_id FROM {CLAIM}
                             WHERE workspace_id = %s AND released_at IS NULL
                               AND path = ANY(%s)))
        ORDER BY id
        FOR SHARE
        """,
        [issue_id, workspace_id, paths],
    )


def claim_issue_status(*, issue_id: int) -> Statement:
    """SQLite's form of ``share_claim_issues``: only the claiming issue's status."""
    return f"SELECT id, status FROM {ISSUE} WHERE id = %s", [issue_id]


def locked_holders(d: Dialect, *, workspace_id: int, paths: list[str]) -> Statement:
    """The unreleased claims on ``paths`` with their agent and whether their session is
    live, row-locked in path order (invariant 5: what a claim classifies stays true
    until it commits)."""
    return (
        f"SELECT {columns(CLAIM, 'c')}, {columns(AGENT, 'a')}, {d.live('s')}"
        f" FROM {CLAIM} c LEFT JOIN {SESSION} s ON s.id = c.session_id"
        f" LEFT JOIN {AGENT} a ON a.id = c.agent_id"
        " WHERE c.workspace_id = %s AND c.released_at IS NULL"
        f" AND c.path IN ({placeholders(paths)}) ORDER BY c.path{d.lock('FOR UPDATE OF c')}",
        [workspace_id, *paths],
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
    """One unreleased claim per path (invariant 5). ON CONFLICT turns a path someone
    else holds into "no row" instead of an error that would abort the PostgreSQL
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
    d: Dialect, *, workspace_id: int, rows: list[ConflictRow], forced: bool
) -> Statement:
    """Invariants 5 and 8: one append-only ``claim_conflicts`` row per contested path,
    in one INSERT (a refused claim holds its path locks until this commits)."""
    values = ", ".join([f"(%s, %s, %s, %s, %s, %s, %s, %s, %s, {d.now()})"] * len(rows))
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
) -> Statement:
    """Release the unreleased claims matching every given filter, returning each one's
    ``ReleasedClaim`` columns (its holder, for the event log). The rows are locked in
    path order first, the order claimers lock them in, so a release and a claim of the
    same paths queue instead of deadlocking."""
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
    return (
        f"UPDATE {CLAIM} SET released_at = {d.now()}, release_reason = %s"
        f" WHERE released_at IS NULL AND id IN (SELECT id FROM {CLAIM}"
        f" WHERE {' AND '.join(conditions)} ORDER BY path{d.lock('FOR UPDATE')})"
        f" RETURNING path, issue_id, session_id, agent_id,"
        f" (SELECT project_id FROM {ISSUE} WHERE id = {CLAIM}.issue_id)",
        [reason, *params],
    )
