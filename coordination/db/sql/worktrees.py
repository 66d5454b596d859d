"""Worktree locks and the append-only logs' door."""

from coordination.db.sql.base import LOG_UNLOCK, WORKTREE, WORKTREE_LOCK, Dialect, Statement


def lock_worktree_row(*, worktree_id: int) -> Statement:
    """PostgreSQL only: inserters of one worktree's lock queue on its row, so each
    insert's snapshot sees every lock committed before it (its fence is never reused)."""
    return f"SELECT id FROM {WORKTREE} WHERE id = %s FOR NO KEY UPDATE", [worktree_id]


def insert_worktree_lock(
    d: Dialect, *, workspace_id: int, worktree_id: int, session_id: int, run_id: int
) -> Statement:
    """Invariant 10 (lock mode per run): one writer per worktree. The partial unique index is the
    guard; ON CONFLICT turns the loser's insert into "no row"."""
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


# --- the append-only logs' door --------------------------------


def open_log_door(*, workspace_id: int) -> Statement:
    """Invariant 8 (append-only logs): the database refuses UPDATE and DELETE of log rows unless the
    workspace has an unlock row (migration 0007)."""
    return f"INSERT INTO {LOG_UNLOCK} (workspace_id) VALUES (%s)", [workspace_id]


def close_log_door(*, workspace_id: int) -> Statement:
    return f"DELETE FROM {LOG_UNLOCK} WHERE workspace_id = %s", [workspace_id]
