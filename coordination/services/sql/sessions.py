"""Keys and sessions: the lookup every request starts with, the heartbeat, liveness."""

from typing import Any

from coordination.services.sql.base import (
    AGENT,
    API_KEY,
    SESSION,
    WORKSPACE,
    WORKTREE,
    Dialect,
    Statement,
    columns,
)


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
