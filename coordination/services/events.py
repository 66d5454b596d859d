"""Writing the event log: one event per change, in the change's transaction
(invariant 12 (one event per change)).

Services open their transactions with ``change()`` instead of ``transaction.atomic()``
and call ``record()`` for what they did. The events wait in a per-thread buffer and
are written when the outermost ``change()`` block ends, as the last statements before
its commit; a block left by an exception drops what it recorded, so a refused or
rolled-back attempt announces nothing.

**The cursor guarantee, the writers' half.** A reader following ``next``
(``coordination.feed``) must never skip an id that a transaction still open could
commit. An id comes from the table's sequence when the row is inserted, but becomes
visible at commit, and transactions commit in any order: were id 11 read before id
10 commits, a reader at 11 would never see 10. So on PostgreSQL every writer first
takes the workspace's event-writer lock (``ADVISORY_LOCK_KEYS["event_log"]``,
*shared*, transaction-scoped), then draws its ids: whoever holds an id that is not
yet visible holds that lock until its commit has become visible (PostgreSQL makes a
commit visible before it releases the transaction's locks). The reader's half
(``feed.read``) waits for the writers it finds holding the lock before it reads. The
lock is shared, so writers never wait for each other: nothing serialises their
commits. On SQLite ``BEGIN IMMEDIATE`` serialises writers for their whole
transaction and ``AUTOINCREMENT`` never reuses an id, so ids are visible in id order.

**Wakeups.** After the commit, one NOTIFY per change tells the other app servers'
waiters (``sql.notify`` says why not inside the transaction); this process's waiters
are woken directly.

**No deadlock.** The lock is shared and only readers look at it (in ``pg_locks``;
nothing takes it exclusively), and the event rows carry no foreign-key constraints,
so their insert takes no row lock. Heartbeats write no events.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from coordination.db import sql
from coordination.db.rows import dialect, execute
from coordination.db.sql import ADVISORY_LOCK_KEYS
from coordination.models import AgentSession, Event, EventType, IssueLease, Workspace


class _Buffer(threading.local):
    def __init__(self) -> None:
        self.depth = 0
        self.pending: list[tuple[int, sql.EventRow]] = []


_buffer = _Buffer()


@contextmanager
def change() -> Iterator[None]:
    """A transaction of coordination state whose recorded events are written with it.

    Nested blocks are savepoints and keep their events for the outermost block, which
    writes them all just before it commits; a block left by an exception drops its own.
    """
    with transaction.atomic():
        mark = len(_buffer.pending)
        _buffer.depth += 1
        try:
            yield
        except BaseException:
            del _buffer.pending[mark:]
            raise
        finally:
            _buffer.depth -= 1
        if _buffer.depth == 0 and _buffer.pending:
            pending, _buffer.pending = _buffer.pending, []
            if not transaction.get_rollback():  # set_rollback(True): nothing happened
                write(pending)


def record(
    workspace_id: int,
    type: str,
    *,
    project_id: int | None = None,
    issue_id: int | None = None,
    session_id: int | None = None,
    agent_id: int | None = None,
    data: dict[str, Any] | None = None,
) -> None:
    """Announce a change made in the enclosing ``change()`` block."""
    if _buffer.depth == 0:
        raise RuntimeError("events.record() outside events.change(): it would not be atomic")
    row = sql.EventRow(
        type=type,
        project_id=project_id,
        issue_id=issue_id,
        session_id=session_id,
        agent_id=agent_id,
        data=data or {},
    )
    _buffer.pending.append((workspace_id, row))


def write(pending: list[tuple[int, sql.EventRow]]) -> None:
    """One INSERT per workspace (nearly always one), taking the writer lock on
    PostgreSQL; after the commit, wake the waiters."""
    by_workspace: dict[int, list[sql.EventRow]] = {}
    for workspace_id, row in pending:
        by_workspace.setdefault(workspace_id, []).append(row)
    d, lock = dialect(), ADVISORY_LOCK_KEYS["event_log"]
    for workspace_id, rows in sorted(by_workspace.items()):
        execute(sql.insert_events(d, workspace_id=workspace_id, rows=rows, lock=lock))
    after_commit(sorted(by_workspace))


def buffering() -> bool:
    """Inside a ``change()`` block: events recorded now are written at its end."""
    return _buffer.depth > 0


def after_commit(workspace_ids: list[int]) -> None:
    """Once the events just written commit (at once outside a transaction): tell the
    waiters of ``workspace_ids`` (``feed.committed``)."""
    from coordination import feed  # the reader side; imported late, it imports services

    transaction.on_commit(lambda: feed.committed(workspace_ids), using=connection.alias)


# --- what the services announce, in the fields of docs/api.md "Events" --------------------


def holder(session_id: int | None, agent_name: str | None) -> dict[str, Any]:
    """``by``: who took what another held."""
    return {"session": session_id, "agent": agent_name}


def session_event(session: AgentSession, type: str) -> None:
    record(session.workspace_id, type, session_id=session.pk, agent_id=session.agent_id)


def lease_released(
    lease: IssueLease, *, reason: str, project_id: int | None, by: dict[str, Any] | None = None
) -> None:
    """Named for the holder that lost it; ``by`` for ``expired`` and ``overridden``."""
    data: dict[str, Any] = {"lease": lease.pk, "fence": lease.fence, "reason": reason}
    if by is not None:
        data["by"] = by
    record(
        lease.workspace_id,
        EventType.LEASE_RELEASED,
        project_id=project_id,
        issue_id=lease.issue_id,
        session_id=lease.session_id,
        agent_id=lease.agent_id,
        data=data,
    )


def claims_released(
    workspace_id: int,
    released: list[sql.ReleasedClaim],
    *,
    reason: str,
    by: dict[str, Any] | None = None,
) -> None:
    """One ``claims.released`` per holder (issue and session) of ``released``."""
    groups: dict[tuple[int, int | None, int | None, int | None], list[str]] = {}
    for claim in released:
        key = (claim.issue_id, claim.session_id, claim.agent_id, claim.project_id)
        groups.setdefault(key, []).append(claim.path)
    for (issue_id, session_id, agent_id, project_id), paths in sorted(
        groups.items(), key=lambda item: (item[0][0], item[0][1] or 0)
    ):
        data: dict[str, Any] = {"paths": sorted(paths), "reason": reason}
        if by is not None:
            data["by"] = by
        record(
            workspace_id,
            EventType.CLAIMS_RELEASED,
            project_id=project_id,
            issue_id=issue_id,
            session_id=session_id,
            agent_id=agent_id,
            data=data,
        )


# --- retention ------------------------------------------------------------------------------

PRUNE_BATCH = 10_000


def prune_events(*, older_than: timedelta) -> dict[str, int]:
    """Delete each workspace's events older than ``older_than``; return how many per
    workspace slug.

    A workspace loses a prefix of its ids: everything up to its newest event older than
    the cutoff (ids follow commits, stamps nearly so). Its ``events_pruned_through``
    then says where the prefix ended, so a reader whose cursor lies below it learns
    that it missed events (``"missed": true``) instead of silently skipping them. The
    rows go in batches, each its own short transaction."""
    cutoff = timezone.now() - older_than
    pruned: dict[str, int] = {}
    for workspace in Workspace.objects.order_by("pk"):
        top = (
            Event.objects.filter(workspace=workspace, occurred_at__lt=cutoff)
            .order_by("-pk")
            .values_list("pk", flat=True)
            .first()
        )
        if top is None or top <= workspace.events_pruned_through:
            continue
        deleted = 0
        with transaction.atomic():  # the watermark first: readers see "missed" at once
            Workspace.objects.filter(pk=workspace.pk).update(events_pruned_through=top)
        while batch := list(
            Event.objects.filter(workspace=workspace, pk__lte=top)
            .order_by("pk")
            .values_list("pk", flat=True)[:PRUNE_BATCH]
        ):
            deleted += Event.objects.filter(pk__in=batch)._raw_delete(connection.alias)
        pruned[workspace.slug] = deleted
    return pruned
