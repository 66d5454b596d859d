"""/readyz while PostgreSQL refuses connections: 503 naming the database, /healthz
still 200, /metrics still answering with readiness 0; ready again by itself."""

import http.client
import json

import psycopg
import pytest
from django.db import connections

from tests.faults.client import wait_until
from tests.faults.database import admin_connection, backends, db_settings


def get(port: int, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers={"Connection": "close"})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def ready(port: int) -> bool:
    return get(port, "/readyz")[0] == 200


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_readiness_names_the_database_while_it_is_down(gunicorn):
    """The database goes down as in test_database_down.py: connections refused and
    the test database's backends terminated, from an admin connection."""
    name = db_settings()["NAME"]
    assert ready(gunicorn.port)
    admin = admin_connection()
    try:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )
        wait_until(lambda: backends(admin) == 0, 15, "the test database's backends to end")
        answers = [get(gunicorn.port, "/readyz") for _ in range(2 * gunicorn.workers)]
        health = get(gunicorn.port, "/healthz")
        metrics_status, metrics = get(gunicorn.port, "/metrics")
    finally:
        try:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        except psycopg.Error:
            with admin_connection() as again:
                again.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin.close()
        connections.close_all()

    for status, text in answers:
        assert status == 503, text
        body = json.loads(text)
        assert body["code"] == "unavailable"
        assert "database" in body["failing"], body
        assert body["checks"]["database"].startswith("OperationalError"), body
        assert body["checks"]["migrations"].startswith("not checked")
    assert health == (200, '{"status": "ok"}')
    assert metrics_status == 200
    assert 'projektor_ready{check="database"} 0.0' in metrics
    assert "projektor_live_sessions" not in metrics  # no fleet to read
    wait_until(lambda: ready(gunicorn.port), 60, "/readyz to answer 200 again")
