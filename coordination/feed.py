"""Reading the event log: by cursor, waiting for what comes next (invariant 12 (one event per
change)).

``read`` answers the events after a cursor, in id order, and never skips an id that a
transaction still open could commit (the cursor guarantee). The writers' half is in
``coordination.services.events``: on PostgreSQL a writer holds the workspace's
event-writer lock, shared, from before it draws its ids until its commit is visible.
The reader's half, on PostgreSQL:

1. ``newest``: the highest id of the workspace it can see, *v*. Every id up to *v* was
   drawn before this statement began (ids grow, and *v* was committed by then), so
   its writer had finished or was holding the lock then.
2. It waits until every transaction holding the lock now has finished (``pg_locks``).
   A writer of an id up to *v* that was still open in 1. is either among them or
   finished in between; writers that took the lock after 1. draw ids above *v*.
3. It reads the events with ``after < id <= v``: a snapshot taken after 2. sees every
   one of them that committed, so an answer never jumps over an id that could still
   appear. Ids above *v* wait for the next read.

The wait is short: the lock is taken by the last statements of a transaction, so its
holders are committing. It is bounded all the same (a transaction that wrote its
events and then went on, a seed in one transaction, would hold it): past the bound
the read answers nothing new, which is late but never wrong. On SQLite one writer
runs at a time and ids become visible in id order: the read is the plain query.

``wait_for`` holds a request until an event arrives or its wait ends, holding no
transaction while it waits, nor on PostgreSQL a connection (it closes it; SQLite's is an
open file, kept), and sleeps on a condition that a commit wakes. A commit through this
process wakes it at once; a commit through another app server wakes it through
PostgreSQL's ``LISTEN/NOTIFY``, heard by one listener thread per process. SQLite has no
notifications, and its app servers share one machine: there a commit that wrote events
appends a byte to a signal file beside the database (``<database>-events``), and one
watcher thread per process looks at the file's size and time every ``WATCH_SECONDS`` (a
``stat``, no query) and wakes the waiters when they change. Either way a waiter re-reads
now and then without being woken (``LISTENING_POLL_SECONDS``), in case a signal was lost;
without a listener or watcher (a database in memory) every ``POLL_SECONDS``.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from django.db import DatabaseError, connection, connections
from psycopg.conninfo import make_conninfo

from coordination.db import sql
from coordination.db.rows import execute, fetchall, fetchone
from coordination.idle import idle
from coordination.models import Event, Workspace

log = logging.getLogger(__name__)

MAX_LIMIT = 1000
MAX_WAIT_SECONDS = 30
# Without a notification (SQLite, or PostgreSQL while the listener reconnects): re-read
# this often. With one, re-read anyway now and then, in case a notification was lost.
POLL_SECONDS = 0.25
LISTENING_POLL_SECONDS = 5.0
# How long a read waits for the writers committing ids it might otherwise jump over.
WRITERS_BOUND_SECONDS = 1.0
# How often the listener looks up from its notifications to see whether to stop.
LISTENER_CHECK_SECONDS = 1.0
# How often SQLite's watcher looks at the signal file; past this size a committer
# empties it (a change of size either way is the signal).
WATCH_SECONDS = 0.05
SIGNAL_FILE_LIMIT = 1 << 20


@dataclass(frozen=True)
class EventFilter:
    """The ``/events/`` filters, already resolved to ids (None: any)."""

    types: frozenset[str] | None = None
    project_id: int | None = None
    issue_id: int | None = None
    agent_id: int | None = None
    session_id: int | None = None


@dataclass(frozen=True)
class Page:
    events: list[Event]
    next: int
    missed: bool


def read(
    workspace: Workspace,
    *,
    after: int,
    filters: EventFilter,
    limit: int,
    writers_bound: float = WRITERS_BOUND_SECONDS,
) -> Page:
    """The workspace's events with id > ``after`` that pass ``filters``, in id order.

    The events are read first and the prune watermark after: a prune that committed
    before the first read is seen by the second, so ``missed`` is never lost."""
    rows = Event.objects.filter(workspace_id=workspace.pk, id__gt=after)
    if connection.vendor == "postgresql":
        newest = fetchone(sql.newest_event(workspace_id=workspace.pk, after=after))
        if newest is None or newest[0] is None or not writers_done(workspace, writers_bound):
            rows = rows.none()
        else:
            rows = rows.filter(id__lte=newest[0])
    if filters.types is not None:
        rows = rows.filter(type__in=sorted(filters.types))
    for column, value in (
        ("project_id", filters.project_id),
        ("issue_id", filters.issue_id),
        ("agent_id", filters.agent_id),
        ("session_id", filters.session_id),
    ):
        if value is not None:
            rows = rows.filter(**{column: value})
    found = list(rows.select_related("project", "agent").order_by("id")[:limit])
    pruned = (
        Workspace.objects.filter(pk=workspace.pk)
        .values_list("events_pruned_through", flat=True)
        .get()
    )
    missed = after < pruned
    # With none found but some pruned, past those: the next read does not report them again.
    next_after = found[-1].pk if found else (max(after, pruned) if missed else after)
    return Page(events=found, next=next_after, missed=missed)


def writers_done(workspace: Workspace, bound: float) -> bool:
    """Wait until the transactions holding the workspace's event-writer lock now have
    finished; False if they have not within ``bound`` seconds."""
    namespace = sql.ADVISORY_LOCK_KEYS["event_log"]
    holders = [
        vxid
        for (vxid,) in fetchall(
            sql.writer_lock_holders(namespace=namespace, workspace_id=workspace.pk)
        )
    ]
    end = time.monotonic() + bound
    pause = 0.001
    while holders:
        (left,) = fetchone(sql.still_writing(transactions=holders)) or (0,)
        if not left:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(pause)  # they are committing: a few milliseconds
        pause = min(pause * 2, 0.02)
    return True


def wait_for(
    read_page: Callable[[], Page], *, seconds: float, deadline: float | None = None
) -> Page:
    """``read_page()`` until it finds events or ``seconds`` have passed."""
    end = deadline if deadline is not None else time.monotonic() + seconds
    while True:
        seen = wakeups.generation()  # before the read: a commit after it is not missed
        page = read_page()
        remaining = end - time.monotonic()
        if page.events or page.missed or remaining <= 0:
            return page
        release_connection()
        with idle():  # another request runs meanwhile (coordination.idle)
            wakeups.wait(seen, timeout=min(remaining, wakeups.poll_seconds()))


def release_connection() -> None:
    """Before sleeping, give back a connection that is a database server's slot
    (PostgreSQL's), unless a transaction that is not ours holds it, as a test's does.

    SQLite's is kept: it is an open file that holds no lock outside a transaction, and
    opening it again costs about six times the read a wake-up makes (Django registers
    its SQL functions on every new connection); every commit that writes events wakes
    every waiter of the process."""
    if connection.vendor != "sqlite" and not connection.in_atomic_block:
        connection.close()


def committed(workspace_ids: list[int]) -> None:
    """After a commit that wrote events (``services.events``): tell the other app
    servers (PostgreSQL NOTIFY, in its own statement; SQLite's signal file) and wake
    this one's waiters."""
    wakeups.wake()
    if connection.vendor == "postgresql":
        try:
            execute(sql.notify(workspace_ids=workspace_ids))
        except DatabaseError as error:  # they re-read on their own within seconds
            log.warning("could not notify event waiters: %s", error)
        return
    path = signal_path()
    if path is not None:
        try:
            with path.open("ab") as signal:
                if signal.tell() >= SIGNAL_FILE_LIMIT:
                    signal.truncate(0)
                signal.write(b".")
        except OSError as error:  # they re-read on their own within seconds
            log.warning("could not signal event waiters: %s", error)


def signal_path() -> Path | None:
    """SQLite's signal file, beside its database file; None for a database in memory."""
    name = str(connections["default"].settings_dict["NAME"])
    if connection.vendor != "sqlite" or not name or name.startswith("file:") or ":memory:" in name:
        return None
    return Path(f"{name}-events")


def signature(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_size, status.st_mtime_ns


class Wakeups:
    """One per process: a generation counter that commits bump, waiters sleep on."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._generation = 0
        self._listener: threading.Thread | None = None
        self._stopping = threading.Event()  # the current listener's
        self.listening = False

    def generation(self) -> int:
        with self._condition:
            return self._generation

    def wake(self) -> None:
        with self._condition:
            self._generation += 1
            self._condition.notify_all()

    def wait(self, seen: int, *, timeout: float) -> None:
        self.ensure_listener()
        with self._condition:
            self._condition.wait_for(lambda: self._generation != seen, timeout=timeout)

    def poll_seconds(self) -> float:
        return LISTENING_POLL_SECONDS if self.listening else POLL_SECONDS

    def ensure_listener(self) -> None:
        """Start the PostgreSQL listener, or SQLite's watcher of the signal file, on first
        use (after gunicorn forked us)."""
        path = None if connection.vendor == "postgresql" else signal_path()
        if connection.vendor != "postgresql" and path is None:
            return
        with self._condition:
            if self._listener is not None and self._listener.is_alive():
                return
            self._stopping = threading.Event()
            self._listener = threading.Thread(
                target=self._listen if path is None else self._watch,
                args=(self._stopping,) if path is None else (self._stopping, path),
                name="projektor-events-listener",
                daemon=True,
            )
            self._listener.start()

    def _watch(self, stopping: threading.Event, path: Path) -> None:
        """SQLite's listener: the signal file's size and time, every ``WATCH_SECONDS``."""
        seen = signature(path)
        self.listening = True
        self.wake()  # anything signalled before the first look: waiters re-read
        try:
            while not stopping.wait(WATCH_SECONDS):
                now = signature(path)
                if now != seen:
                    seen = now
                    self.wake()
        finally:
            self.listening = False

    def stop(self, timeout: float = 10.0) -> None:
        """End the listener and close its connection; the next wait starts another.
        For the tests: a connection left open keeps their database from being dropped."""
        with self._condition:
            listener, self._listener = self._listener, None
            self._stopping.set()
        if listener is not None:
            listener.join(timeout)

    def _listen(self, stopping: threading.Event) -> None:
        backoff = 0.5
        while not stopping.is_set():
            try:
                with psycopg.connect(conninfo(), autocommit=True) as listener:
                    listener.execute(f"LISTEN {sql.CHANNEL}")
                    self.listening = True
                    self.wake()  # anything committed before LISTEN: waiters re-read
                    backoff = 0.5
                    while not stopping.is_set():
                        # Notifications that arrive between two calls wait in the
                        # connection for the next one: none is lost.
                        for _ in listener.notifies(timeout=LISTENER_CHECK_SECONDS):
                            self.wake()
            except psycopg.Error as error:
                log.warning("event listener lost its connection (%s); reconnecting", error)
            finally:
                self.listening = False
            # The database is down: try again, less often each time.
            stopping.wait(backoff)
            backoff = min(backoff * 2, 10.0)


def conninfo() -> str:
    """The default database's connection parameters, for the listener's own connection."""
    settings = connections["default"].settings_dict
    params: dict[str, Any] = {"dbname": settings["NAME"]}
    for key, name in (("USER", "user"), ("PASSWORD", "password"), ("HOST", "host")):
        if settings.get(key):
            params[name] = settings[key]
    if settings.get("PORT"):
        params["port"] = int(settings["PORT"])
    params["connect_timeout"] = 5
    return make_conninfo(**params)


wakeups = Wakeups()
