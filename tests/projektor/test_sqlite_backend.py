"""The SQLite backend (projektor/sqlite3/base.py): each statement's placeholders are
converted as Django converts them, once per text, and it is the backend in use."""

import sqlite3

import pytest
from django.db import connection
from django.db.backends.sqlite3.base import SQLiteCursorWrapper as DjangosCursor

from projektor.sqlite3.base import LONGEST_KEPT, SQLiteCursorWrapper, kept_qmark, qmark

STATEMENTS = [
    "SELECT 1",
    "SELECT * FROM t WHERE a = %s AND b IN (%s, %s)",
    "SELECT strftime('%%Y-%%m-%%dT%%H:%%M:%%f', 'now'), %s",
    "SELECT '100%%', '%%s', %s, '%%%s'",
    "UPDATE t SET note = %s WHERE id = %s RETURNING id",
]


@pytest.mark.parametrize("statement", STATEMENTS)
def test_a_statement_is_converted_as_djangos_cursor_converts_it(statement):
    expected = DjangosCursor.convert_query(None, statement)  # type: ignore[arg-type]
    assert qmark(statement) == expected
    assert qmark(statement) == expected  # kept: the same text again


def test_a_long_statement_is_converted_and_not_kept():
    kept_qmark.cache_clear()
    long = "INSERT INTO t VALUES " + ", ".join(["(%s, '%%')"] * LONGEST_KEPT)
    assert qmark(long) == DjangosCursor.convert_query(None, long)  # type: ignore[arg-type]
    assert kept_qmark.cache_info().currsize == 0


def test_named_placeholders_are_djangos():
    statement = "SELECT %(a)s, %(b)s"
    database = sqlite3.connect(":memory:")
    try:
        ours = database.cursor(factory=SQLiteCursorWrapper)
        djangos = database.cursor(factory=DjangosCursor)
        names = ["a", "b"]
        converted = ours.convert_query(statement, param_names=names)
        assert converted == djangos.convert_query(statement, param_names=names) == "SELECT :a, :b"
    finally:
        database.close()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's backend")
@pytest.mark.django_db
def test_the_backend_in_use_converts_once_and_runs_the_statement():
    kept_qmark.cache_clear()
    with connection.cursor() as cursor:
        assert isinstance(cursor.cursor, SQLiteCursorWrapper)
        for _ in range(3):
            cursor.execute("SELECT %s || '%%', %s", ["50", 2])
            assert cursor.fetchone() == ("50%", 2)
    info = kept_qmark.cache_info()
    assert (info.misses, info.hits) == (1, 2)
