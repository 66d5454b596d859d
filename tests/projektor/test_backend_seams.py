"""The PostgreSQL backend's seam on Django's private API (``projektor.postgresql``;
its docstring says what it relies on and what it gained): each test fails when the
installed Django no longer has the shape the seam was written against. Then measure
again before carrying the seam over. SQLite runs on Django's own backend."""

import inspect

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql import base as postgresql

from projektor.postgresql import base as our_postgresql


def parameters(function) -> list[tuple[str, object, object]]:
    return [
        (name, parameter.kind, parameter.default)
        for name, parameter in inspect.signature(function).parameters.items()
    ]


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
    source = inspect.getsource(BaseDatabaseWrapper.close_if_health_check_failed)
    assert "health_check_enabled" in source and "health_check_done" in source
    assert issubclass(our_postgresql.DatabaseWrapper, postgresql.DatabaseWrapper)
