"""Every hand-written statement, as a ``(sql, params)`` builder.

The statements every agent request makes are SQL rather than querysets: building and
compiling a queryset costs three to four times the round trip it sends, and a fleet
pays that on every request (``coordination.services.rows``). They live here, and only
here, so that the services and the bench's direct ceiling
(``coordination.benchmark.direct``) send the same statements by construction.

This module imports nothing from Django: the direct ceiling runs without it. What it
needs of the connection (the backend, the session TTL) comes in as a ``Dialect``.
Placeholders are ``%s`` and a literal ``%`` is written ``%%``, as Django's cursors
and psycopg take them; the direct client translates both for sqlite3.

Everything is written in the SQL that SQLite (>= 3.35) and PostgreSQL share
(``RETURNING``, partial indexes, ``ON CONFLICT``); a statement differs per backend
only where the backends truly do: row and advisory locks (``Dialect.lock``; SQLite's
``BEGIN IMMEDIATE`` already made the transaction the only writer), the clock and
``UPDATE ... FROM``. Each builder names the invariant it protects
(docs/design.md); the order in which the locks are taken is told once, in
``coordination.services.locking``.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Statement = tuple[str, list[Any]]

# --- tables and their columns ------------------------------------------------------------

# The models' db_table (tests pin them against the models).
API_KEY = "coordination_apikey"
WORKSPACE = "coordination_workspace"
WORKTREE = "coordination_worktree"
PROJECT = "coordination_project"
AGENT = "coordination_agent"
SESSION = "agent_sessions"
ISSUE = "coordination_issue"
LEASE = "issue_leases"
CLAIM = "issue_file_claims"
CONFLICT = "claim_conflicts"
WORKTREE_LOCK = "coordination_worktreelock"
LOG_UNLOCK = "projektor_log_unlock"

# Every concrete column of each model, in the model's field order: rows read with these
# become fully loaded model instances (``rows.instance``), never half-loaded ones whose
# later attribute reads would quietly query. Tests pin them against the models.
COLUMNS: dict[str, tuple[str, ...]] = {
    API_KEY: (
        "id", "workspace_id", "name", "key_prefix", "key_hash", "created_at", "revoked_at",
    ),
    WORKSPACE: ("id", "slug", "name", "created_at"),
    WORKTREE: ("id", "workspace_id", "slug", "name", "path", "branch", "created_at"),
    PROJECT: (
        "id", "workspace_id", "key", "name", "agent_wip_limit", "primary_worktree_id",
        "created_at",
    ),
    AGENT: ("id", "workspace_id", "name", "role", "department", "worktree_id", "created_at"),
    SESSION: (
        "id", "workspace_id", "agent_id", "status", "started_at", "last_heartbeat_at",
        "ended_at",
    ),
    ISSUE: (
        "id", "workspace_id", "project_id", "title", "description", "status", "priority",
        "report", "requires_filesystem", "worktree_id", "assignee_id", "created_at",
        "updated_at",
    ),
    LEASE: (
        "id", "workspace_id", "issue_id", "session_id", "agent_id", "acquired_at",
        "released_at", "release_reason", "fence",
    ),
    CLAIM: (
        "id", "workspace_id", "issue_id", "session_id", "agent_id", "path", "claimed_at",
        "released_at", "release_reason",
    ),
}  # fmt: skip


def columns(table: str, alias: str) -> str:
    """``alias.column, ...`` for every column of ``table``."""
    return ", ".join(f"{alias}.{column}" for column in COLUMNS[table])


def placeholders(values: Sequence[Any]) -> str:
    """``%s, %s, %s`` for an ``IN (...)`` list of ``values``."""
    return ", ".join(["%s"] * len(values))


# --- the dialect: clock, liveness, locks ---------------------------------------------------


@dataclass(frozen=True)
class Dialect:
    """What a statement needs to know of its connection."""

    vendor: str  # "postgresql" or "sqlite"
    ttl_seconds: int  # PROJEKTOR_SESSION_TTL_SECONDS

    @property
    def postgres(self) -> bool:
        return self.vendor == "postgresql"

    def now(self) -> str:
        """The database's clock (invariant 1: one clock writes and judges heartbeats).

        SQLite stores datetimes as ISO text; ``%f`` has milliseconds only, and the
        padding to microseconds keeps text comparisons with Django-written values
        right."""
        if self.postgres:
            return "statement_timestamp()"
        return "(strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now') || '000')"

    def live(self, alias: str) -> str:
        """Invariant 1, as SQL: the session row ``alias`` is active and its last
        heartbeat is younger than the TTL."""
        ttl = int(self.ttl_seconds)
        if self.postgres:
            cutoff = f"statement_timestamp() - interval '{ttl} seconds'"
        else:
            cutoff = f"(strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '-{ttl} seconds') || '000')"
        return f"({alias}.status = 'active' AND {alias}.last_heartbeat_at > {cutoff})"

    def lock(self, clause: str) -> str:
        """`` FOR UPDATE`` and the like on PostgreSQL; nothing on SQLite, whose
        ``BEGIN IMMEDIATE`` already made this transaction the only writer."""
        return f" {clause}" if self.postgres else ""


# --- keys and sessions ---------------------------------------------------------------------


def active_key(key_hash: str) -> Statement:
    """The unrevoked key of that digest, with its workspace: one indexed read."""
    return (
        f"SELECT {columns(API_KEY, 'k')}, {columns(WORKSPACE, 'w')}"
        f" FROM {API_KEY} k JOIN {WORKSPACE} w ON w.id = k.workspace_id"
        " WHERE k.key_hash = %s AND k.revoked_at IS NULL",
        [key_hash],
    )


def shown_session_columns(d: Dialect) -> str:
    """What the API shows of a session: the session (as ``agent_sessions``), whether
    it is live, its agent (``a``) and the agent's worktree (``w``)."""
    return ", ".join(
        [columns(SESSION, SESSION), d.live(SESSION), columns(AGENT, "a"), columns(WORKTREE, "w")]
    )


def heartbeat(d: Dialect, *, workspace_id: int, session_id: int) -> Statement:
    """Refresh an active session with the database clock (invariant 1). PostgreSQL
    returns the session as shown in the same statement; SQLite cannot return another
    table's columns from an UPDATE, so ``shown_session`` reads them after."""
    beat = f"UPDATE {SESSION} SET last_heartbeat_at = {d.now()}"
    match = f"{SESSION}.workspace_id = %s AND {SESSION}.id = %s AND {SESSION}.status = %s"
    params: list[Any] = [workspace_id, session_id, "active"]
    if d.postgres:
        return (
            f"{beat} FROM {AGENT} a LEFT JOIN {WORKTREE} w ON w.id = a.worktree_id"
            f" WHERE a.id = {SESSION}.agent_id AND {match}"
            f" RETURNING {shown_session_columns(d)}",
            params,
        )
    return f"{beat} WHERE {match}", params


def shown_session(d: Dialect, *, session_id: int) -> Statement:
    return (
        f"SELECT {shown_session_columns(d)} FROM {SESSION}"
        f" JOIN {AGENT} a ON a.id = {SESSION}.agent_id"
        f" LEFT JOIN {WORKTREE} w ON w.id = a.worktree_id WHERE {SESSION}.id = %s",
        [session_id],
    )


def session_is_live(d: Dialect, *, session_id: int) -> Statement:
    """One row iff the session is live (invariant 1), judged by the database."""
    return f"SELECT 1 FROM {SESSION} s WHERE s.id = %s AND {d.live('s')}", [session_id]


def claimer_session(d: Dialect, *, workspace_id: int, session_id: int) -> Statement:
    """The session, its agent and whether it is live: read inside a claim's
    transaction, so liveness is judged when the claim is made (invariant 2)."""
    return (
        f"SELECT {columns(SESSION, 's')}, {columns(AGENT, 'a')}, {d.live('s')}"
        f" FROM {SESSION} s JOIN {AGENT} a ON a.id = s.agent_id"
        " WHERE s.id = %s AND s.workspace_id = %s",
        [session_id, workspace_id],
    )


# --- issues and leases ---------------------------------------------------------------------


def workspace_issue(*, workspace_id: int, issue_id: int) -> Statement:
    return (
        f"SELECT {columns(ISSUE, 'i')} FROM {ISSUE} i WHERE i.id = %s AND i.workspace_id = %s",
        [issue_id, workspace_id],
    )


def project_wip_limit(d: Dialect, *, project_id: int) -> Statement:
    """The WIP limit under the project's row lock (invariant 3). NO KEY UPDATE
    conflicts with itself (claimers queue) but not with the foreign-key checks of
    rows that merely point at the project."""
    lock = d.lock("FOR NO KEY UPDATE")
    return f"SELECT agent_wip_limit FROM {PROJECT} WHERE id = %s{lock}", [project_id]


def issue_status(d: Dialect, *, issue_id: int, share: bool) -> Statement:
    """The issue's status, ``FOR SHARE`` (PostgreSQL) with ``share``: ordered against
    a close, which locks the issue before releasing what it holds."""
    lock = d.lock("FOR SHARE") if share else ""
    return f"SELECT status FROM {ISSUE} WHERE id = %s{lock}", [issue_id]


def share_issue_nowait(*, issue_id: int) -> Statement:
    """PostgreSQL only: the issue ``FOR SHARE NOWAIT`` (fails with 55P03 if locked)."""
    return f"SELECT id FROM {ISSUE} WHERE id = %s FOR SHARE NOWAIT", [issue_id]


def insert_lease_within_cap(
    d: Dialect,
    *,
    workspace_id: int,
    issue_id: int,
    session_id: int,
    agent_id: int,
    project_id: int,
    limit: int,
) -> Statement:
    """Invariants 2 and 3: insert the lease iff the project's live leases are below
    ``limit``, numbering its fence ``MAX(fence) + 1``; the partial unique index turns
    a second unreleased lease into "no row" (``leases.insert_lease_within_cap``)."""
    return (
        f"""
        INSERT INTO {LEASE} (workspace_id, issue_id, session_id, agent_id,
                             acquired_at, release_reason, fence)
        SELECT %s, %s, %s, %s, {d.now()}, '',
               (SELECT COALESCE(MAX(f.fence), 0) + 1 FROM {LEASE} f WHERE f.issue_id = %s)
        WHERE (SELECT count(*) FROM {LEASE} l
               JOIN {ISSUE} i ON i.id = l.issue_id
               JOIN {SESSION} s ON s.id = l.session_id
               WHERE i.project_id = %s AND l.released_at IS NULL
                 AND {d.live("s")}) < %s
        ON CONFLICT (workspace_id, issue_id) WHERE released_at IS NULL DO NOTHING
        RETURNING id
        """,
        [workspace_id, issue_id, session_id, agent_id, issue_id, project_id, limit],
    )


def lease_fence(d: Dialect, *, issue_id: int, share: bool) -> Statement:
    """The fence of the issue's unreleased lease; ``FOR SHARE`` with ``share``, so a
    reclaim, release or close (which UPDATE that row) waits for this transaction."""
    lock = d.lock("FOR SHARE") if share else ""
    return (
        f"SELECT fence FROM {LEASE} WHERE issue_id = %s AND released_at IS NULL{lock}",
        [issue_id],
    )


def release_if_holder_dead(
    d: Dialect, *, table: str, row_id: int, sessionless_is_dead: bool, reason: str
) -> Statement:
    """Invariant 4: compare-and-set release of a lease, claim or worktree lock iff its
    holder session is not live; 0 rows means it is live (or revived), or someone else
    released it first."""
    sessionless = "session_id IS NULL OR" if sessionless_is_dead else "session_id IS NOT NULL AND"
    return (
        f"""
        UPDATE {table} SET released_at = {d.now()}, release_reason = %s
        WHERE id = %s AND released_at IS NULL
          AND ({sessionless} NOT EXISTS (
                SELECT 1 FROM {SESSION} s
                WHERE s.id = {table}.session_id AND {d.live("s")}))
        """,
        [reason, row_id],
    )


# --- file claims ---------------------------------------------------------------------------


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
    """Release the unreleased claims matching every given filter, returning their
    paths. The rows are locked in path order first, the order claimers lock them in,
    so a release and a claim of the same paths queue instead of deadlocking."""
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
        " RETURNING path",
        [reason, *params],
    )


# --- worktree locks ------------------------------------------------------------------------


def lock_worktree_row(*, worktree_id: int) -> Statement:
    """PostgreSQL only: inserters of one worktree's lock queue on its row, so each
    insert's snapshot sees every lock committed before it (its fence is never reused)."""
    return f"SELECT id FROM {WORKTREE} WHERE id = %s FOR NO KEY UPDATE", [worktree_id]


def insert_worktree_lock(
    d: Dialect, *, workspace_id: int, worktree_id: int, session_id: int, run_id: int
) -> Statement:
    """Invariant 10: one writer per worktree. The partial unique index is the guard;
    ON CONFLICT turns the loser's insert into "no row"."""
    return (
        f"""
        INSERT INTO {WORKTREE_LOCK} (workspace_id, worktree_id, session_id, run_id,
                                     acquired_at, release_reason, fence)
        VALUES (%s, %s, %s, %s, {d.now()}, '',
                (SELECT COALESCE(MAX(f.fence), 0) + 1 FROM {WORKTREE_LOCK} f
                 WHERE f.worktree_id = %s))
        ON CONFLICT (worktree_id) WHERE released_at IS NULL DO NOTHING
        RETURNING id
        """,
        [workspace_id, worktree_id, session_id, run_id, worktree_id],
    )


# --- the append-only logs' door and the rate-limit counters --------------------------------


def open_log_door(*, workspace_id: int) -> Statement:
    """Invariant 8: the database refuses UPDATE and DELETE of log rows unless the
    workspace has an unlock row (migration 0007)."""
    return f"INSERT INTO {LOG_UNLOCK} (workspace_id) VALUES (%s)", [workspace_id]


def close_log_door(*, workspace_id: int) -> Statement:
    return f"DELETE FROM {LOG_UNLOCK} WHERE workspace_id = %s", [workspace_id]


def count_hit(*, quoted_table: str, key: str, expires: Any) -> Statement:
    """One atomic increment of a rate-limit counter (an upsert), returning the count."""
    return (
        f"INSERT INTO {quoted_table} (cache_key, value, expires) VALUES (%s, '1', %s)"
        " ON CONFLICT (cache_key) DO UPDATE"
        f" SET value = CAST(CAST({quoted_table}.value AS INTEGER) + 1 AS TEXT)"
        " RETURNING value",
        [key, expires],
    )


def forget_ended_windows(*, quoted_table: str, now: Any) -> Statement:
    return f"DELETE FROM {quoted_table} WHERE expires < %s", [now]
