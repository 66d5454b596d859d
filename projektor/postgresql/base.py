"""Django's PostgreSQL backend, plus cursors whose statements the server binds and
prepares (``settings.DATABASES`` names this backend on PostgreSQL).

Django's cursors bind on the client: psycopg quotes every value into the statement's
text, so no two calls send the same text and nothing can be prepared. The services'
SQL (``coordination.db.rows``: every statement an agent's call makes) runs on
``prepared_cursor()`` instead: its values travel apart from the text, and once a
connection has run a statement ``prepare_threshold`` times (the settings' OPTIONS;
without one it is Django's cursor after all) psycopg prepares it, so the server
parses and plans it once per connection instead of on every call. The ORM keeps
Django's own cursors: its statements are not all written to be bound on the server
(Django's #34255), and bound there they would be held to the protocol's 65,535
parameters a statement, which Django's batching does not keep to on PostgreSQL.

A seam on Django's private API (Django is pinned ``<5.3``), kept to this module:
``BaseDatabaseWrapper._prepare_cursor(self, cursor)`` (Django's wrapping of a new
cursor, called by ``prepared_cursor``); ``DatabaseWrapper.create_cursor``, which
makes an unnamed cursor with ``self.connection.cursor()`` and so of the connection's
``cursor_factory`` (swapped for ``ServerBindingCursor`` around the call);
``base.ServerBindingCursor``; the health check's flags (``health_check_enabled``,
``health_check_done``). The gains, measured: prepared statements took heartbeats from
400 to 658/s and lease cycles from 135 to 187/s (docs/history/speed.md, "On
PostgreSQL those statements are prepared"); the quiet-socket health check takes a
tenth off a heartbeat's CPU. A seam that buys less than a tenth of a hot call is not
kept (times are read by Django's own loader). ``tests/projektor/test_backend_seams.py``
fails when Django changes under it; then measure again before carrying the seam over.
"""

import select
from typing import Any

from django.db.backends.postgresql import base, operations
from django.db.backends.utils import CursorWrapper
from psycopg import errors
from psycopg.pq import TransactionStatus


class DatabaseOperations(operations.DatabaseOperations):
    def last_executed_query(self, cursor: Any, sql: str, params: Any) -> str:
        """A prepared cursor's statement with its values in place, as Django shows the
        others (``connection.queries``, the tests' captured statements)."""
        if isinstance(cursor, base.ServerBindingCursor):
            try:
                return str(self.compose_sql(sql, params))
            except errors.DataError:
                return sql  # a value that cannot be shown as SQL: the statement as sent
        return super().last_executed_query(cursor, sql, params)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    def close_if_health_check_failed(self) -> None:
        """Django's health check (``SELECT 1`` before a persistent connection's first
        use in a request; replaced when it fails), asked only when the idle connection
        has something to read. A server that ends a connection (a restart, a terminated
        backend, a crash) writes its last words or closes the socket, so the socket is
        readable; a healthy idle one is not. A quiet socket saves a round trip on every
        request (a tenth of a heartbeat's CPU)."""
        # Django sets both flags on the wrapper (its stubs do not declare them).
        checking = getattr(self, "health_check_enabled", False)
        done = getattr(self, "health_check_done", False)
        if self.connection is not None and checking and not done and quiet(self.connection):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def prepared_cursor(self) -> CursorWrapper:
        """Like ``cursor()`` (the health check, the connection, Django's wrappers and
        error translation), but binding on the server, so that its statements are
        prepared. With no ``prepare_threshold`` it is ``cursor()``: bound on the server
        and never prepared, a heartbeat was slower than with Django's binding."""
        if self.settings_dict["OPTIONS"].get("prepare_threshold") is None:
            return self.cursor()
        self.close_if_health_check_failed()
        self.ensure_connection()
        with self.wrap_database_errors:
            cursor: CursorWrapper = self._prepare_cursor(  # type: ignore[attr-defined]
                self.create_server_binding_cursor()
            )
            return cursor

    def create_server_binding_cursor(self) -> Any:
        """Django's ``create_cursor`` (its time zone for timestamps included) with the
        server-binding cursor class in place of its client-binding one."""
        connection = self.connection
        client_binding = connection.cursor_factory
        connection.cursor_factory = base.ServerBindingCursor
        try:
            return self.create_cursor()
        finally:
            connection.cursor_factory = client_binding


def quiet(connection: Any) -> bool:
    """An open, idle connection with nothing to read on its socket."""
    if connection.closed or connection.broken:
        return False
    if connection.info.transaction_status != TransactionStatus.IDLE:
        return False
    if not hasattr(select, "poll"):  # not on every platform: then Django's check each time
        return False
    try:
        poller = select.poll()
        poller.register(connection.fileno(), select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False
