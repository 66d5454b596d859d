"""The backends' seams on Django's private API (``projektor.sqlite3``,
``projektor.postgresql``; their docstrings say what each relies on and what it
gained): each test fails when the installed Django no longer has the shape the
seam was written against. Then measure again before carrying the seam over."""

import inspect

import pytest
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql import base as postgresql
from django.db.backends.postgresql import psycopg_any
from django.db.backends.sqlite3 import base as sqlite3

from projektor.postgresql import base as our_postgresql
from projektor.sqlite3 import base as our_sqlite3


def parameters(function) -> list[tuple[str, object, object]]:
    return [
        (name, parameter.kind, parameter.default)
        for name, parameter in inspect.signature(function).parameters.items()
    ]


def test_sqlite_converts_with_djangos_regular_expression():
    regex = sqlite3.FORMAT_QMARK_REGEX
    assert regex.sub("?", "SELECT %s, '%%s' WHERE a = %s") == "SELECT ?, '%%s' WHERE a = ?"
    assert our_sqlite3.converted("a = %s AND b LIKE 'x%%'") == "a = ? AND b LIKE 'x%'"


@pytest.mark.parametrize(
    ("ours", "djangos"),
    [
        (our_sqlite3.SQLiteCursorWrapper.convert_query, sqlite3.SQLiteCursorWrapper.convert_query),
        (our_sqlite3.DatabaseWrapper.create_cursor, sqlite3.DatabaseWrapper.create_cursor),
    ],
    ids=["convert_query", "create_cursor"],
)
def test_sqlite_overrides_keep_djangos_signatures(ours, djangos):
    assert parameters(ours) == parameters(djangos)


def test_sqlite_convert_query_takes_named_parameters_by_keyword():
    kinds = parameters(sqlite3.SQLiteCursorWrapper.convert_query)
    assert kinds[1][0] == "query"
    assert kinds[2] == ("param_names", inspect.Parameter.KEYWORD_ONLY, None)


def test_postgresql_prepare_cursor_wraps_a_cursor():
    assert [name for name, _, _ in parameters(BaseDatabaseWrapper._prepare_cursor)] == [
        "self",
        "cursor",
    ]


def test_postgresql_create_cursor_makes_unnamed_cursors_of_the_cursor_factory():
    """``create_server_binding_cursor`` swaps ``connection.cursor_factory``: that works
    while Django's ``create_cursor`` makes an unnamed cursor with no class of its own."""
    assert [name for name, _, _ in parameters(postgresql.DatabaseWrapper.create_cursor)] == [
        "self",
        "name",
    ]
    source = inspect.getsource(postgresql.DatabaseWrapper.create_cursor)
    assert "cursor = self.connection.cursor()" in source
    assert "cursor_factory" in inspect.getsource(postgresql.DatabaseWrapper.get_connection_params)


def test_postgresql_names_the_seam_uses_are_there():
    assert isinstance(postgresql.ServerBindingCursor, type)
    assert isinstance(postgresql.TIMESTAMPTZ_OID, int)
    assert [name for name, _, _ in parameters(psycopg_any.get_adapters_template)] == [
        "use_tz",
        "timezone",
    ]
    source = inspect.getsource(BaseDatabaseWrapper.close_if_health_check_failed)
    assert "health_check_enabled" in source and "health_check_done" in source
    assert issubclass(our_postgresql.DatabaseWrapper, postgresql.DatabaseWrapper)
