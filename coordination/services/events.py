"""Writing the event log: one event per change, in the change's transaction
(invariant 12).

Services open their transactions with ``change()`` instead of ``transaction.atomic()``
and call ``record()`` for what they did. The events wait in a per-thread buffer and
are written by one statement when the outermost ``change()`` block ends, as the last
statement before its commit; a block left by an exception drops what it recorded,
so a refused or rolled-back attempt announces nothing.

**The cursor guarantee.** A reader following ``next`` (``coordination.feed``) must
never skip an id that a transaction still open could commit. On PostgreSQL an id
comes from a sequence when the row is formed, but becomes visible at commit, and
transactions commit in any order: were id 11 visible before id 10 commits, a reader
at 11 would never see 10. So the write takes the workspace's event-log advisory lock
(``ADVISORY_LOCK_KEYS["event_log"]``, transaction-scoped) before its ids are drawn,
and holds it until its commit has become visible (PostgreSQL makes a commit visible
before it releases the transaction's locks). The next writer of the workspace draws
its ids only after that. Hence within a workspace: id order = commit order, and a
snapshot that shows an event shows every earlier event of the workspace that will
ever commit. Readers are scoped to one workspace, so the interleaving of other
workspaces' ids does not matter. On SQLite, ``BEGIN IMMEDIATE`` serialises every
writer for its whole transaction, and ``AUTOINCREMENT`` never reuses an id, which
gives the same order without a lock.

**Why it cannot deadlock, and what it costs.** The lock is the last one a transaction
takes (its events are written last) and a transaction holding it waits for nothing
more but its commit; the event rows carry no foreign-key constraints, so their insert
takes no row lock either. It serialises only the commits of a workspace's changes
that write events; heartbeats write none.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from coordination.models import AgentSession, Event, EventType, IssueLease, Workspace
from coordination.services import sql
from coordination.services.locking import ADVISORY_LOCK_KEYS
from coordination.services.rows import dialect, fetchall


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
    """One statement per workspace (nearly always one); notify this process's waiters
    after the commit (other processes hear PostgreSQL's NOTIFY)."""
    by_workspace: dict[int, list[sql.EventRow]] = {}
    for workspace_id, row in pending:
        by_workspace.setdefault(workspace_id, []).append(row)
    namespace = ADVISORY_LOCK_KEYS["event_log"]
    # Workspaces in id order: a change touching two takes their locks in one order.
    for workspace_id, rows in sorted(by_workspace.items()):
        fetchall(
            sql.insert_events(
                dialect(), workspace_id=workspace_id, rows=rows, serial_namespace=namespace
            )
        )
    from coordination import feed  # the reader side; imported late, it imports services

    workspaces = sorted(by_workspace)
    transaction.on_commit(lambda: feed.wake(workspaces), using=connection.alias)


# --- what the services announce, in the fields of docs/api.md "Events" --------------------


def holder(session_id: int | None, agent_name: str | None) -> dict[str, Any]:
    """``by``: who took what another held."""
    return {"session": session_id, "agent": agent_name}


def session_event(session: AgentSession, type: str) -> None:
    record(session.workspace_id, type, session_id=session.pk, agent_id=session.agent_id)


def lease_granted(lease: IssueLease, *, project_id: int) -> None:
    record(
        lease.workspace_id,
        EventType.LEASE_GRANTED,
        project_id=project_id,
        issue_id=lease.issue_id,
        session_id=lease.session_id,
        agent_id=lease.agent_id,
        data={"lease": lease.pk, "fence": lease.fence},
    )


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
