"""Every hand-written statement, as a ``(sql, params)`` builder, one module per concern.

The statements every agent request makes are SQL rather than querysets: building and
compiling a queryset costs three to four times the round trip it sends, and a fleet
pays that on every request (``coordination.db.rows``). They live here, and only
here, so that the services and the bench's direct ceiling
(``benchmarks.direct``) send the same statements by construction.

This package imports nothing from Django: the direct ceiling runs without it. What it
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

from coordination.db.sql.base import (
    ADVISORY_LOCK_KEYS,
    AGENT,
    API_KEY,
    CLAIM,
    COLUMNS,
    CONFLICT,
    EVENT,
    ISSUE,
    LEASE,
    LOG_UNLOCK,
    PROJECT,
    RUN,
    SESSION,
    WORKSPACE,
    WORKTREE,
    WORKTREE_LOCK,
    Dialect,
    Statement,
    columns,
    placeholders,
    related_columns,
    set_columns,
)
from coordination.db.sql.counters import (
    count_hit,
    forget_ended_windows,
    set_unlogged,
    table_persistence,
)
from coordination.db.sql.events import (
    CHANNEL,
    EventRow,
    insert_events,
    newest_event,
    notify,
    still_writing,
    writer_lock_holders,
)
from coordination.db.sql.file_claims import (
    ConflictRow,
    Overlap,
    ReleasedClaim,
    claim_issue_status,
    insert_claims,
    insert_conflicts,
    ordered_locks,
    overlap_of,
    overlapping_holders,
    overlapping_ids,
    path_locks,
    release_claims,
    release_claims_announced,
    release_dead_claims,
    share_claim_issues,
)
from coordination.db.sql.leases import (
    assign_unassigned_issue,
    insert_lease_within_cap,
    issue_status,
    lease_fence,
    lock_issue_project,
    refresh_ages_out_at,
    release_if_holder_dead,
    release_leases,
    release_stale_lease,
    share_claimed_issue,
    share_issue_nowait,
    unreleased_lease,
    unreleased_row,
)
from coordination.db.sql.queue import Queue, queue_count, queue_page, queue_window
from coordination.db.sql.sessions import (
    SessionList,
    active_key,
    announce_stalls,
    claim_context,
    heartbeat,
    key_ring_version,
    progress,
    run_agent,
    session_agent,
    session_count,
    session_is_live,
    session_page,
    shown_session,
    shown_session_columns,
)
from coordination.db.sql.worktrees import (
    close_log_door,
    insert_worktree_lock,
    lock_worktree_row,
    open_log_door,
)

__all__ = [
    "ADVISORY_LOCK_KEYS",
    "AGENT",
    "CHANNEL",
    "API_KEY",
    "CLAIM",
    "COLUMNS",
    "CONFLICT",
    "ConflictRow",
    "Dialect",
    "EVENT",
    "EventRow",
    "ISSUE",
    "LEASE",
    "LOG_UNLOCK",
    "PROJECT",
    "RUN",
    "ReleasedClaim",
    "SESSION",
    "Statement",
    "WORKSPACE",
    "WORKTREE",
    "WORKTREE_LOCK",
    "Overlap",
    "Queue",
    "active_key",
    "key_ring_version",
    "assign_unassigned_issue",
    "claim_issue_status",
    "claim_context",
    "close_log_door",
    "columns",
    "count_hit",
    "forget_ended_windows",
    "set_unlogged",
    "table_persistence",
    "heartbeat",
    "insert_claims",
    "insert_conflicts",
    "insert_events",
    "newest_event",
    "notify",
    "still_writing",
    "writer_lock_holders",
    "insert_lease_within_cap",
    "insert_worktree_lock",
    "issue_status",
    "lease_fence",
    "lock_worktree_row",
    "ordered_locks",
    "overlap_of",
    "overlapping_holders",
    "overlapping_ids",
    "path_locks",
    "open_log_door",
    "placeholders",
    "queue_count",
    "queue_page",
    "queue_window",
    "lock_issue_project",
    "release_claims",
    "release_claims_announced",
    "release_dead_claims",
    "release_if_holder_dead",
    "release_stale_lease",
    "refresh_ages_out_at",
    "announce_stalls",
    "progress",
    "related_columns",
    "set_columns",
    "release_leases",
    "run_agent",
    "session_agent",
    "session_count",
    "session_page",
    "SessionList",
    "session_is_live",
    "share_claim_issues",
    "share_claimed_issue",
    "share_issue_nowait",
    "shown_session",
    "shown_session_columns",
    "unreleased_lease",
    "unreleased_row",
]
