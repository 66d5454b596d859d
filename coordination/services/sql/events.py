"""The event log's one write (invariant 12)."""

import json
from dataclasses import dataclass, field
from typing import Any

from coordination.services.sql.base import EVENT, Dialect, Statement

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


def insert_events(
    d: Dialect, *, workspace_id: int, rows: list[EventRow], serial_namespace: int
) -> Statement:
    """Write a transaction's events, last in the transaction (``services.events``).

    PostgreSQL: in one statement, first the workspace's event-log advisory lock (held
    to the commit, so the workspace's ids are handed out in commit order: the cursor
    guarantee), then the rows, whose ids the sequence gives as the insert forms them,
    after the lock, then a NOTIFY that the commit delivers to every listening server.
    SQLite: ``BEGIN IMMEDIATE`` made this the only writer, so ids already follow
    commits.
    """
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
    target = (
        f"INSERT INTO {EVENT} (workspace_id, type, project_id, issue_id, session_id,"
        " agent_id, data, occurred_at)"
    )
    if not d.postgres:
        values = ", ".join([f"(%s, %s, %s, %s, %s, %s, %s, {d.now()})"] * len(rows))
        return f"{target} VALUES {values}", params
    values = ", ".join(
        ["(%s::bigint, %s::varchar, %s::bigint, %s::bigint, %s::bigint, %s::bigint, %s::jsonb)"]
        * len(rows)
    )
    return (
        "WITH serial AS MATERIALIZED (SELECT pg_advisory_xact_lock(%s, %s)),"
        f" written AS ({target}"
        " SELECT v.workspace_id, v.type, v.project_id, v.issue_id, v.session_id, v.agent_id,"
        f" v.data, {d.now()} FROM serial, (VALUES {values})"
        " AS v(workspace_id, type, project_id, issue_id, session_id, agent_id, data))"
        f" SELECT pg_notify('{CHANNEL}', %s)",
        [serial_namespace, workspace_id, *params, str(workspace_id)],
    )
