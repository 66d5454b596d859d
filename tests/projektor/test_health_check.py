"""The connection health check on PostgreSQL (projektor/postgresql/base.py): a
persistent connection's ``SELECT 1`` runs only when its idle socket has something to
read, and a connection the server ended is still found and replaced before use."""

import select
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections

from projektor.postgresql.base import quiet

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def persistent() -> Iterator[Any]:
    """A connection of its own, kept between requests and health-checked, as an app
    server's thread keeps one."""
    wrapper = connections.create_connection("default")
    wrapper.settings_dict = {**wrapper.settings_dict, "CONN_HEALTH_CHECKS": True}
    wrapper.ensure_connection()
    wrapper.health_check_enabled = True
    try:
        yield wrapper
    finally:
        wrapper.close()


def backend_pid(wrapper: Any) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def next_request(wrapper: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What Django does at a request's first statement; returns the full checks run."""
    checks: list[str] = []
    full_check = wrapper.is_usable
    monkeypatch.setattr(wrapper, "is_usable", lambda: checks.append("SELECT 1") or full_check())
    wrapper.health_check_done = False
    wrapper.close_if_health_check_failed()
    return checks


def test_a_quiet_idle_connection_is_used_without_a_round_trip(persistent, monkeypatch):
    pid = backend_pid(persistent)
    assert quiet(persistent.connection)

    assert next_request(persistent, monkeypatch) == []
    assert persistent.connection is not None and backend_pid(persistent) == pid


def test_a_connection_the_server_ended_is_checked_and_replaced(persistent, monkeypatch):
    pid = backend_pid(persistent)
    admin = connections.create_connection("default")
    try:
        with admin.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        admin.close()
    poller = select.poll()  # the server's last words are on their way
    poller.register(persistent.connection.fileno(), select.POLLIN)
    assert poller.poll(30_000), "the ended connection's socket stayed quiet"
    assert not quiet(persistent.connection)

    assert next_request(persistent, monkeypatch) == ["SELECT 1"]
    assert persistent.connection is None  # closed: the next statement opens a new one
    assert backend_pid(persistent) != pid


def test_a_connection_inside_a_transaction_is_not_called_quiet(persistent):
    persistent.connection.execute("BEGIN")
    try:
        assert not quiet(persistent.connection)
    finally:
        persistent.connection.execute("ROLLBACK")
    assert quiet(persistent.connection)
