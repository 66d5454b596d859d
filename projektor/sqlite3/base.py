"""Django's SQLite backend, with each statement's placeholders converted once.

Python's sqlite3 takes ``?`` where Django writes ``%s``: Django's cursor converts
every statement on every execution with a regular expression (behind a lazy object)
over its whole text. The services send the same few statements on every call, some
of them long (a claim's), and that conversion was 7 % of a claim cycle's server
time. Here a statement's converted text is kept (``qmark``, a bounded LRU cache) and
found again by the text itself; the conversion is Django's own, unchanged.

A seam on Django's private API (Django is pinned ``<5.3``), kept to this module:
``django.db.backends.sqlite3.base.FORMAT_QMARK_REGEX`` (the conversion's regular
expression), ``SQLiteCursorWrapper.convert_query(self, query, *, param_names=None)``
(overridden) and ``DatabaseWrapper.create_cursor(self, name=None)`` (overridden to
use the cursor class below). The gain, measured: 7 % of a claim cycle's server time
(docs/history/speed.md, "Times that looked like floats, and the statements'
placeholders", 2). ``tests/projektor/test_backend_seams.py`` fails when Django
changes under it; then measure again before carrying the seam over.
"""

from functools import lru_cache
from typing import Any

from django.db.backends.sqlite3 import base

# Statements of the services and the ORM's usual ones; the ORM's with a varying
# number of values (IN lists) come and go. A longer text (a bulk insert's thousand
# rows) is converted each time and not kept: at most a few megabytes are held.
CONVERTED_STATEMENTS = 2048
LONGEST_KEPT = 4096  # characters; a claim's statements are under 2,000


def qmark(query: str) -> str:
    """Django's "format" to sqlite3's "qmark" style (``%s`` → ``?``, ``%%`` → ``%``)."""
    return kept_qmark(query) if len(query) <= LONGEST_KEPT else converted(query)


def converted(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


kept_qmark = lru_cache(maxsize=CONVERTED_STATEMENTS)(converted)


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query: str, *, param_names: Any = None) -> str:
        if param_names is None:
            return qmark(query)
        return super().convert_query(query, param_names=param_names)


class DatabaseWrapper(base.DatabaseWrapper):
    def create_cursor(self, name: Any = None) -> SQLiteCursorWrapper:
        return self.connection.cursor(factory=SQLiteCursorWrapper)
