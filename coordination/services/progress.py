"""Stalls (invariant 17 (stalled is derived)): ``session.stalled``, once per stall.

Stalled is derived when read (``liveness.stalled_q``, ``Dialect.stalled``); nothing
here decides it. The long-running worker (``deliver_webhooks``) calls
``announce_stalls`` every ``STALL_CHECK_SECONDS`` so that event readers and webhooks
hear of a stall; a session that makes progress and stalls again is announced again.
"""

from datetime import UTC, datetime

from django.utils.dateparse import parse_datetime

from coordination.db import sql
from coordination.db.rows import dialect, fetchall
from coordination.models import EventType
from coordination.services import events

# How often the worker looks for newly stalled sessions: "within about a minute".
STALL_CHECK_SECONDS = 60.0


def announce_stalls() -> int:
    """Mark every newly stalled session announced and write its ``session.stalled``
    (``{"since": last_progress_at}``) in the same transaction; how many."""
    with events.change():
        stalled = fetchall(sql.announce_stalls(dialect()))
        for session_id, workspace_id, agent_id, since in stalled:
            events.record(
                workspace_id,
                EventType.SESSION_STALLED,
                session_id=session_id,
                agent_id=agent_id,
                data={"since": stamp(since).isoformat()},
            )
    return len(stalled)


def stamp(value: datetime | str) -> datetime:
    """A stamp as the database returned it (SQLite: text in UTC), aware."""
    moment = parse_datetime(value) if isinstance(value, str) else value
    assert moment is not None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
