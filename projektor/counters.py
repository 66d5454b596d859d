"""The rate-limit counters on the embedded SQLite: a database file of their own.

SQLite has one write lock per database file, and the rate limiter writes on every
request. Counted in a table of the coordination database (Django's database cache),
each request's counter queued for the lock that heartbeats, claims and releases of
every app process queue for, and held it up for them in turn: on a heartbeat-only
load the limiter cost about a third of the throughput. Here the counters live in a
second SQLite file beside the database, ``<database file>-throttle`` (as SQLite puts
its ``-wal`` and ``-shm`` beside it), with a write lock of its own: a count waits at
most for other counts, each one statement of microseconds, and never for the
coordination database, nor it for them.

Across app processes it is as shared and as atomic as the table was: every process
opens the same file (WAL, so a reader never waits for the writer), and an increment
is one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` statement, which SQLite runs
under the file's write lock: two processes never both take the last request of a
window. Writers queue on the busy timeout, as on the coordination database. The
file is as disposable as Redis's counters (``synchronous=OFF``: an operating-system
crash may lose the last counts, at most a window's worth); it needs no migration
(each connection makes the table if it is missing) and no backup.

A Django cache backend (``CACHES["throttle"]``, set by the settings on SQLite without
``REDIS_URL``) for counters only: ``coordination.services.rate_limits.hit`` calls
``hit``; the rest of the cache API works on integer values, atomically, for the
health check (``get``) and the tests (``clear``).
"""

import sqlite3
import threading
import time
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.db import connections

SUFFIX = "-throttle"
BUSY_TIMEOUT_SECONDS = 20  # the coordination database's (settings.DATABASES)

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS counters"
    " (key TEXT PRIMARY KEY, count INTEGER NOT NULL, expires REAL)",
    "CREATE INDEX IF NOT EXISTS counters_expires ON counters (expires)",
)
# A row whose expiry has passed counts as absent (NULL: it never expires).
CURRENT = "(expires IS NULL OR expires >= ?)"


def counters_path(database: str) -> str:
    """The counters' file beside the SQLite database file ``database`` (an in-memory
    database's are in memory too: one process's, which is all that can use it)."""
    return ":memory:" if database in ("", ":memory:") else f"{database}{SUFFIX}"


def to_wal(opened: sqlite3.Connection) -> None:
    """WAL mode, as every connection asks. Switching a new file to it takes the file
    exclusively and SQLite does not wait for that lock (the busy timeout is not
    asked): another process opening the new file at that moment is told "database is
    locked" at once. It asks again until the switch is done, within the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    pause = 0.001
    while True:
        try:
            opened.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
        time.sleep(pause)  # the other process's switch: a few milliseconds
        pause = min(pause * 2, 0.05)


class SQLiteCounterCache(BaseCache):
    """Integer counters in their own SQLite file: ``LOCATION``, or when it is empty
    ``counters_path`` of the default database as it is now (the test runner's
    database under the tests)."""

    def __init__(self, location: str, params: dict[str, Any]) -> None:
        super().__init__(params)
        self.location = location
        self.local = threading.local()  # one connection per thread (sqlite3's rule)

    def path(self) -> str:
        return self.location or counters_path(str(connections["default"].settings_dict["NAME"]))

    def connection(self) -> sqlite3.Connection:
        path = self.path()
        if getattr(self.local, "path", None) != path:
            opened = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
            to_wal(opened)
            opened.execute("PRAGMA synchronous=OFF")
            for statement in SCHEMA:
                opened.execute(statement)
            self.local.connection, self.local.path = opened, path
        connection: sqlite3.Connection = self.local.connection
        return connection

    def expiry(self, timeout: Any) -> float | None:
        expires: float | None = self.get_backend_timeout(timeout)
        return expires

    # --- the counter ----------------------------------------------------------------

    def hit(self, key: str, ttl: int) -> int:
        """Add one to the counter ``key`` (a new one expires in ``ttl`` s) and return
        its count, in one statement; a window's first count also forgets the counters
        of the windows that have ended (indexed on ``expires``)."""
        key = self.make_and_validate_key(key)
        now = time.time()
        connection = self.connection()
        (count,) = connection.execute(
            "INSERT INTO counters (key, count, expires) VALUES (?, 1, ?)"
            " ON CONFLICT (key) DO UPDATE SET count = count + 1 RETURNING count",
            [key, now + ttl],
        ).fetchone()
        if count == 1:
            connection.execute("DELETE FROM counters WHERE expires < ?", [now])
        return int(count)

    # --- the cache API, for integers --------------------------------------------------

    def get(self, key: str, default: Any = None, version: int | None = None) -> Any:
        key = self.make_and_validate_key(key, version=version)
        row = (
            self.connection()
            .execute(f"SELECT count FROM counters WHERE key = ? AND {CURRENT}", [key, time.time()])
            .fetchone()
        )
        return default if row is None else int(row[0])

    def set(
        self,
        key: str,
        value: Any,
        timeout: Any = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> None:
        key = self.make_and_validate_key(key, version=version)
        self.connection().execute(
            "INSERT INTO counters (key, count, expires) VALUES (?, ?, ?) ON CONFLICT (key)"
            " DO UPDATE SET count = excluded.count, expires = excluded.expires",
            [key, counted(value), self.expiry(timeout)],
        )

    def add(
        self,
        key: str,
        value: Any,
        timeout: Any = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> bool:
        """Set ``key`` iff it is absent or expired, in one statement."""
        key = self.make_and_validate_key(key, version=version)
        now = time.time()
        cursor = self.connection().execute(
            "INSERT INTO counters (key, count, expires) VALUES (?, ?, ?) ON CONFLICT (key)"
            " DO UPDATE SET count = excluded.count, expires = excluded.expires"
            " WHERE counters.expires IS NOT NULL AND counters.expires < ?",
            [key, counted(value), self.expiry(timeout), now],
        )
        return cursor.rowcount == 1

    def incr(self, key: str, delta: int = 1, version: int | None = None) -> int:
        """Atomic: one UPDATE (BaseCache's ``incr`` is a get and a set)."""
        key = self.make_and_validate_key(key, version=version)
        row = (
            self.connection()
            .execute(
                f"UPDATE counters SET count = count + ? WHERE key = ? AND {CURRENT}"
                " RETURNING count",
                [counted(delta), key, time.time()],
            )
            .fetchone()
        )
        if row is None:
            raise ValueError(f"Key '{key}' not found")
        return int(row[0])

    def touch(self, key: str, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        cursor = self.connection().execute(
            f"UPDATE counters SET expires = ? WHERE key = ? AND {CURRENT}",
            [self.expiry(timeout), key, time.time()],
        )
        return cursor.rowcount == 1

    def delete(self, key: str, version: int | None = None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return self.connection().execute("DELETE FROM counters WHERE key = ?", [key]).rowcount == 1

    def clear(self) -> None:
        self.connection().execute("DELETE FROM counters")

    def close(self, **kwargs: Any) -> None:
        """At the end of each request: kept open, as the database's connections are,
        unless those are closed after every request (``CONN_MAX_AGE`` 0, as under the
        development server, whose thread per connection would leave one behind each).
        An in-memory file is never closed: it would lose its counts."""
        opened = getattr(self.local, "connection", None)
        keeps = connections["default"].settings_dict["CONN_MAX_AGE"] != 0
        if opened is None or keeps or self.local.path == ":memory:":
            return
        opened.close()
        del self.local.connection, self.local.path


def counted(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"The throttle cache holds integer counters, not {type(value).__name__}.")
    return value
