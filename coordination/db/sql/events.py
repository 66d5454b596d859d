"""The event log's one write (invariant 12 (one event per change))."""

import json
from dataclasses import dataclass, field
from typing import Any

from coordination.db.sql.base import EVENT, Dialect, Statement

# The channel a commit of events notifies; app servers LISTEN on it (``coordination.feed``).
CHANNEL = "projektor_events"


@dataclass(frozen=True)
class EventRow:
    type: str
    project_id: int | None = None
    issue_id: int | None = None
    session_id: int | None = None
    agent_id: int | None = None
    data: dict[str, Any] = field(default_factory=dict)


# PostgreSQL: the VALUES of an INSERT ... SELECT are not typed by the target columns.
EVENT_VALUE_TYPES = ("bigint", "varchar", "bigint", "bigint", "bigint", "bigint", "jsonb")


def insert_events(d: Dialect, *, workspace_id: int, rows: list[EventRow], lock: int) -> Statement:
    """A transaction's events, its last statement (``services.events``); the ids come
    from the table's sequence as the rows are inserted.

    On PostgreSQL the same statement first takes the workspace's event-writer lock
    (the advisory lock (``lock``, workspace), shared, to the commit; a reader waits
    for the writers that hold it: ``coordination.feed``). The rows reach the insert
    through a join with the lock's materialised CTE, so no id is drawn before the lock
    is held, and a change pays one round trip for its events, not two."""
    params: list[Any] = []
    for row in rows:
        params += [
            workspace_id,
            row.type,
            row.project_id,
            row.issue_id,
            row.session_id,
            row.agent_id,
            json.dumps(row.data, separators=(",", ":"), sort_keys=True),
        ]
    columns = "workspace_id, type, project_id, issue_id, session_id, agent_id, data, occurred_at"
    if not d.postgres:
        values = ", ".join([f"(%s, %s, %s, %s, %s, %s, %s, {d.now()})"] * len(rows))
        return f"INSERT INTO {EVENT} ({columns}) VALUES {values}", params
    typed = ", ".join(f"%s::{type}" for type in EVENT_VALUE_TYPES)
    values = ", ".join([f"({typed}, {d.now()})"] * len(rows))
    return (
        "WITH writer AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(%s, %s))"
        f" INSERT INTO {EVENT} ({columns})"
        f" SELECT event.* FROM writer CROSS JOIN (VALUES {values}) AS event",
        [lock, workspace_id, *params],
    )


def notify(*, workspace_ids: list[int]) -> Statement:
    """PostgreSQL only, after the commit, in its own statement: wake the listening app
    servers. Not inside the writing transaction: a transaction that NOTIFYs holds a
    database-wide lock from its pre-commit to its end, which would queue every commit
    behind the one before (its fsync included)."""
    return (
        f"SELECT pg_notify('{CHANNEL}', workspace_id::text)"
        " FROM unnest(%s::bigint[]) AS woken(workspace_id)",
        [workspace_ids],
    )


def newest_event(*, workspace_id: int, after: int) -> Statement:
    """The highest event id of the workspace above ``after`` that this statement sees."""
    return (
        f"SELECT MAX(id) FROM {EVENT} WHERE workspace_id = %s AND id > %s",
        [workspace_id, after],
    )


def writer_lock_holders(*, namespace: int, workspace_id: int) -> Statement:
    """PostgreSQL only: the transactions that hold the workspace's event-writer lock
    now (their virtual transaction ids)."""
    return (
        "SELECT virtualtransaction FROM pg_locks"
        " WHERE locktype = 'advisory' AND granted AND objsubid = 2"
        " AND classid = %s::oid AND objid = %s::oid"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND pid <> pg_backend_pid()",
        [namespace, workspace_id],
    )


def still_writing(*, transactions: list[str]) -> Statement:
    """PostgreSQL only: how many of ``transactions`` still hold an event-writer lock."""
    return (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND virtualtransaction = ANY(%s)",
        [transactions],
    )
