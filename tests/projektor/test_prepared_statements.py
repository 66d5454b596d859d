"""On PostgreSQL the services' statements are prepared (``projektor.postgresql``, the
settings' ``prepare_threshold``): a statement sent that many times on a connection is
parsed and planned once, then run by name. ``PROJEKTOR_PG_PREPARED_STATEMENTS=false``
prepares nothing, for a pooler that cannot hold a session's prepared statements: the
services' statements then run on Django's cursors, as the ORM's always do."""

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from coordination.db import rows
from coordination.models import AgentSession
from tests.api_helpers import post

ROOT = Path(settings.BASE_DIR)
HEARTBEAT_UPDATE = f"UPDATE {AgentSession._meta.db_table} SET last_heartbeat_at"


def runs_of_prepared(prefix: str) -> int:
    """How often this connection has run its prepared statements starting ``prefix``
    (``pg_prepared_statements`` is the connection's own; PostgreSQL 14 counts runs)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(generic_plans + custom_plans), 0)::int"
            " FROM pg_prepared_statements WHERE starts_with(statement, %s)",
            [prefix],
        )
        return int(cursor.fetchone()[0])


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_heartbeat_runs_its_statement_prepared(api, make_session):
    session = make_session()
    beat = f"/sessions/{session.pk}/heartbeat/"
    for _ in range(settings.PREPARE_THRESHOLD):
        assert post(api, beat).status_code == 200
    assert runs_of_prepared(HEARTBEAT_UPDATE) == 0  # sent as text so far

    for _ in range(3):
        assert post(api, beat).status_code == 200
    assert runs_of_prepared(HEARTBEAT_UPDATE) == 3  # prepared, then run by name

    session.refresh_from_db()
    assert session.status == "active"


def database_options(**env: str) -> str:
    probe = "from django.conf import settings; print(settings.DATABASES['default']['OPTIONS'])"
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", probe],
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if k != "PROJEKTOR_PG_PREPARED_STATEMENTS"},
            "DEBUG": "true",
            "DATABASE_URL": "postgres://projektor@db.invalid:5432/projektor",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout


def test_prepared_statements_are_on_by_default_and_can_be_turned_off():
    on = database_options()
    assert "'prepare_threshold': 5" in on and "server_side_binding" not in on
    off = database_options(PROJEKTOR_PG_PREPARED_STATEMENTS="false")
    assert "prepare_threshold" not in off and "server_side_binding" not in off
    assert "jit=off" in off  # the rest of the connection's settings are unchanged


@pytest.mark.postgres
@pytest.mark.django_db
def test_only_the_services_statements_are_bound_on_the_server():
    """The ORM's cursors quote values into the text (Django's default, which its
    statements are written for); the services' cursor sends them apart."""
    with connection.cursor() as orm, rows.cursor() as services:
        assert isinstance(orm.cursor, psycopg.ClientCursor)
        assert not isinstance(services.cursor, psycopg.ClientCursor)
        orm.execute("SELECT %s::int + 1", [41])
        services.execute("SELECT %s::int + 1", [41])
        assert orm.fetchone() == services.fetchone() == (42,)
