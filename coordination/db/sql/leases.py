"""Issues and leases: admission under the WIP cap, fences, reclaiming dead holders."""

from collections.abc import Sequence

from coordination.db.sql.base import (
    AGENT,
    COLUMNS,
    ISSUE,
    LEASE,
    PROJECT,
    SESSION,
    Dialect,
    Statement,
    columns,
    placeholders,
    related_columns,
)


def lock_issue_project(d: Dialect, *, workspace_id: int, issue_id: int) -> Statement:
    """A lease claim's first lock (invariant 3 (the WIP cap)): the row of the issue's project,
    ``FOR NO KEY UPDATE``, found from the workspace's issue in the same statement (only
    the project row is locked; the issue's comes next, as a share). NO KEY UPDATE
    conflicts with itself (claimers of a project queue) but not with the foreign-key
    checks of rows that merely point at the project. Every column of the project, its
    WIP limit read under the lock; no row: no such issue in the workspace."""
    lock = d.lock("FOR NO KEY UPDATE")
    return (
        f"SELECT {columns(PROJECT, 'p')} FROM {PROJECT} p"
        f" WHERE p.id = (SELECT i.project_id FROM {ISSUE} i"
        f" WHERE i.id = %s AND i.workspace_id = %s){lock}",
        [issue_id, workspace_id],
    )


def share_claimed_issue(
    d: Dialect, *, workspace_id: int, issue_id: int, session_id: int
) -> Statement:
    """A lease claim's second lock: the issue ``FOR SHARE`` (PostgreSQL), ordered
    against a close (which locks the issue before it releases what the issue holds)
    and against any change of its assignee; with the claiming session of the
    workspace and its agent (NULLs: no such session). Every column of the three.

    Only the issue row is locked, and after a wait for it the issue's columns are
    re-read; the session's and the agent's are then those the statement began with,
    used only for what does not change (whether the session exists, its agent, the
    agent's name). Its liveness is judged later, by the insert."""
    lock = d.lock("FOR SHARE OF i")
    return (
        f"SELECT {columns(ISSUE, 'i')}, {columns(SESSION, 's')}, {columns(AGENT, 'a')}"
        f" FROM {ISSUE} i LEFT JOIN {SESSION} s ON s.id = %s AND s.workspace_id = %s"
        f" LEFT JOIN {AGENT} a ON a.id = s.agent_id WHERE i.id = %s{lock}",
        [session_id, workspace_id, issue_id],
    )


def unreleased_lease(d: Dialect, *, issue_id: int) -> Statement:
    """The issue's unreleased lease (one at most, invariant 2 (one live lease per issue)), whether
    it is live (its holder live, invariant 1 (liveness), and within its age cap, invariant 17
    (stalled is derived)), whether it aged out, and its agent: what ``selectors.claims.leases``
    shows of it."""
    return (
        f"SELECT {columns(LEASE, 'l')}, {d.lease_live('l', 's')}, NOT {d.young('l')},"
        f" {columns(AGENT, 'a')}"
        f" FROM {LEASE} l LEFT JOIN {SESSION} s ON s.id = l.session_id"
        f" LEFT JOIN {AGENT} a ON a.id = l.agent_id"
        " WHERE l.issue_id = %s AND l.released_at IS NULL",
        [issue_id],
    )


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
    """Invariants 1 (liveness), 2 (one live lease per issue), 3 (the WIP cap) and 17 (stalled is
    derived): insert the lease iff its session is live now and the project's live leases (an
    aged-out one is not) are below ``limit``, numbering its fence ``MAX(fence) + 1`` and stamping
    ``ages_out_at`` from the project's cap; the partial unique index turns a second unreleased lease
    into "no row" (``leases.insert_lease_within_cap``). Returns every column of the new lease. The
    count reads the workspace's unreleased leases off that index (a project's leases
    are its workspace's, invariant 9 (workspace isolation))."""
    return (
        f"""
        INSERT INTO {LEASE} (workspace_id, issue_id, session_id, agent_id,
                             acquired_at, release_reason, fence, ages_out_at)
        SELECT %s, %s, %s, %s, {d.now()}, '',
               (SELECT COALESCE(MAX(f.fence), 0) + 1 FROM {LEASE} f WHERE f.issue_id = %s),
               (SELECT {d.ages_out_at("p.max_lease_age_seconds")} FROM {PROJECT} p
                WHERE p.id = %s)
        WHERE EXISTS (SELECT 1 FROM {SESSION} c WHERE c.id = %s AND {d.live("c")})
          AND (SELECT count(*) FROM {LEASE} l
               JOIN {ISSUE} i ON i.id = l.issue_id
               JOIN {SESSION} s ON s.id = l.session_id
               WHERE l.workspace_id = %s AND l.released_at IS NULL
                 AND i.project_id = %s AND {d.lease_live("l", "s")}) < %s
        ON CONFLICT (workspace_id, issue_id) WHERE released_at IS NULL DO NOTHING
        RETURNING {", ".join(COLUMNS[LEASE])}
        """,
        [
            *(workspace_id, issue_id, session_id, agent_id, issue_id, project_id),
            *(session_id, workspace_id, project_id, limit),
        ],
    )


def assign_unassigned_issue(
    d: Dialect, *, issue_id: int, agent_id: int, replacing: Sequence[int] = ()
) -> Statement:
    """The agent taking the issue becomes its assignee iff it has none, or has one of
    ``replacing`` (the dead holders whose lease it took over): whoever a person (or a
    live agent) assigned stays. Compare-and-set, so a concurrent edit of the assignee
    is never overwritten."""
    replaced = sorted({agent for agent in replacing if agent != agent_id})
    condition = "assignee_id IS NULL"
    if replaced:
        condition = f"(assignee_id IS NULL OR assignee_id IN ({placeholders(replaced)}))"
    return (
        f"UPDATE {ISSUE} SET assignee_id = %s, updated_at = {d.now()}"
        f" WHERE id = %s AND {condition}",
        [agent_id, issue_id, *replaced],
    )


def lease_fence(d: Dialect, *, issue_id: int, share: bool) -> Statement:
    """The fence of the issue's unreleased lease unless it aged out (invariant 17 (stalled is
    derived): an aged-out lease's fence is stale); ``FOR SHARE`` with ``share``, so a reclaim,
    release or close (which UPDATE that row) waits for this transaction."""
    lock = d.lock("FOR SHARE") if share else ""
    return (
        f"SELECT fence FROM {LEASE} WHERE issue_id = %s AND released_at IS NULL"
        f" AND {d.young(LEASE)}{lock}",
        [issue_id],
    )


def release_if_holder_dead(d: Dialect, *, table: str, row_id: int, reason: str) -> Statement:
    """Invariant 4 (stale reclaim): compare-and-set release of a lease or worktree lock iff its
    holder session is not live (a row whose session is gone has no holder); 0 rows means it
    is live (or revived), or someone else released it first."""
    return (
        f"""
        UPDATE {table} SET released_at = {d.now()}, release_reason = %s
        WHERE id = %s AND released_at IS NULL
          AND (session_id IS NULL OR NOT EXISTS (
                SELECT 1 FROM {SESSION} s
                WHERE s.id = {table}.session_id AND {d.live("s")}))
        """,
        [reason, row_id],
    )


def release_stale_lease(d: Dialect, *, lease_id: int) -> Statement:
    """Invariants 4 (stale reclaim) and 17 (stalled is derived): compare-and-set release of a lease
    that is not live, ``expired`` if its holder is dead (the stronger signal), else ``max_age`` (it
    aged out); returning the reason, no row if it is live or already released."""
    dead = (
        f"(session_id IS NULL OR NOT EXISTS (SELECT 1 FROM {SESSION} s"
        f" WHERE s.id = {LEASE}.session_id AND {d.live('s')}))"
    )
    return (
        f"UPDATE {LEASE} SET released_at = {d.now()},"
        f" release_reason = CASE WHEN {dead} THEN 'expired' ELSE 'max_age' END"
        f" WHERE id = %s AND released_at IS NULL AND ({dead} OR NOT {d.young(LEASE)})"
        " RETURNING release_reason",
        [lease_id],
    )


def refresh_ages_out_at(d: Dialect, *, project_id: int, cap: int | None) -> Statement:
    """A project's cap changed: its unreleased leases age out at grant plus the new
    cap (or never), as if it had been the cap when they were granted."""
    if cap is None:
        value, params = "NULL", []
    elif d.postgres:
        value, params = "acquired_at + make_interval(secs => %s)", [cap]
    else:
        value = (
            "(strftime('%%Y-%%m-%%d %%H:%%M:%%f', acquired_at, '+' || %s || ' seconds') || '000')"
        )
        params = [cap]
    return (
        f"UPDATE {LEASE} SET ages_out_at = {value} WHERE released_at IS NULL"
        f" AND issue_id IN (SELECT id FROM {ISSUE} WHERE project_id = %s)",
        [*params, project_id],
    )


def unreleased_row(*, table: str, row_id: int) -> Statement:
    """A row (``1``) iff the lease or worktree lock ``row_id`` is still unreleased."""
    return f"SELECT 1 FROM {table} WHERE id = %s AND released_at IS NULL", [row_id]


def release_leases(
    d: Dialect,
    *,
    reason: str,
    workspace_id: int | None = None,
    lease_id: int | None = None,
    issue_id: int | None = None,
    session_id: int | None = None,
    fence: int | None = None,
) -> Statement:
    """Compare-and-set release of the unreleased leases matching every given filter
    (invariant 7 (release reasons): a lease released meanwhile keeps its first reason; with
    ``fence``, only a lease within its age cap: invariant 17 (stalled is derived)), returning each
    one's columns, its issue's project and its agent's columns (``related_columns``: SQLite's
    RETURNING names no other table, so each is a subquery by primary key)."""
    conditions = ["released_at IS NULL"]
    params: list[object] = [reason]
    for column, value in (
        ("workspace_id", workspace_id),
        ("id", lease_id),
        ("issue_id", issue_id),
        ("session_id", session_id),
        ("fence", fence),
    ):
        if value is not None:
            conditions.append(f"{column} = %s")
            params.append(value)
    if fence is not None:  # an aged-out lease's fence is stale (invariant 17 (stalled is derived))
        conditions.append(d.young(LEASE))
    return (
        f"UPDATE {LEASE} SET released_at = {d.now()}, release_reason = %s"
        f" WHERE {' AND '.join(conditions)} RETURNING {columns(LEASE, LEASE)},"
        f" (SELECT project_id FROM {ISSUE} WHERE id = {LEASE}.issue_id),"
        f" {related_columns(AGENT, f'{LEASE}.agent_id')}",
        params,
    )
