"""Whether a database error means the database is unavailable: the 503 ``unavailable``
answer (docs/design.md, error shape). ``projektor.middleware`` gives it to every
request; the MCP endpoint, which answers errors itself, gives the same.

Only errors about the database's availability count: an ``IntegrityError``, a
``ProgrammingError`` or a ``DataError`` is a bug or bad data and stays a 500.
SQLite reports programming mistakes ("no such table", syntax errors) as
``OperationalError`` too, so for SQLite only the messages below count.
"""

import sqlite3

from django.db import InterfaceError, OperationalError

UNAVAILABLE = {
    "code": "unavailable",
    "detail": "The database is unavailable; retry shortly.",
}
SQLITE_UNAVAILABLE = (
    "database is locked",
    "database table is locked",
    "unable to open database",
    "disk i/o error",
    "database or disk is full",
)


def is_database_unavailable(error: BaseException | None) -> bool:
    """True for an error that says the database cannot serve now, not that the
    request or the code is wrong."""
    if isinstance(error, InterfaceError):
        # psycopg: the connection is closed or broken. sqlite3's InterfaceError is a
        # parameter that cannot be bound: a programming error.
        return not isinstance(error.__cause__, sqlite3.Error)
    if not isinstance(error, OperationalError):
        return False
    cause = error.__cause__
    if isinstance(cause, sqlite3.Error):
        message = str(cause).lower()
        return any(marker in message for marker in SQLITE_UNAVAILABLE)
    # psycopg's OperationalError: connection refused or lost, the server shutting
    # down or terminating the backend, too many connections, a deadlock or a lock
    # or statement timeout. Each is transient: retrying later is the right advice.
    return True
