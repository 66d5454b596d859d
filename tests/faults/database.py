"""PostgreSQL seen from outside the app: an admin connection, the test database's
backends and which process holds them, and the invariants every fault must leave
intact."""

import os
from pathlib import Path
from typing import Any

import psycopg
from django.db import connection

from coordination.models import FileClaim, IssueLease, Project

PG_TIMEOUT = 10  # seconds: connect and statement timeout of the admin connection


def pg_client_ports(pid: int, server_port: int) -> set[int]:
    """Local ports of ``pid``'s TCP connections to PostgreSQL: they name its backends
    in ``pg_stat_activity.client_port``."""
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except OSError:
        return set()
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == server_port:
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def db_settings() -> dict[str, Any]:
    return connection.settings_dict


def admin_connection() -> psycopg.Connection[Any]:
    """A superuser connection to the ``postgres`` database, outside Django."""
    db = db_settings()
    conn = psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=int(db["PORT"] or 5432),
        user=db["USER"] or "postgres",
        password=db["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
        connect_timeout=PG_TIMEOUT,
    )
    conn.execute(f"SET statement_timeout = '{PG_TIMEOUT}s'")
    return conn


def backends(admin: psycopg.Connection[Any], *, in_transaction: bool = False) -> int:
    """How many connections the test database has (optionally: inside a transaction)."""
    extra = " AND xact_start IS NOT NULL" if in_transaction else ""
    row = admin.execute(
        f"SELECT count(*) FROM pg_stat_activity WHERE datname = %s{extra}",
        [db_settings()["NAME"]],
    ).fetchone()
    assert row is not None
    return int(row[0])


# --- invariants ------------------------------------------------------------------------


def assert_no_path_held_twice() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT workspace_id, path, count(*) FROM issue_file_claims "
            "WHERE released_at IS NULL GROUP BY workspace_id, path HAVING count(*) > 1"
        )
        assert cursor.fetchall() == []


def assert_no_claim_without_its_issue() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM issue_file_claims c "
            "LEFT JOIN coordination_issue i ON i.id = c.issue_id WHERE i.id IS NULL"
        )
        assert cursor.fetchone() == (0,)


def assert_leases_within_limits() -> None:
    """One unreleased lease per issue; live leases per project within its WIP cap."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT issue_id FROM issue_leases WHERE released_at IS NULL "
            "GROUP BY issue_id HAVING count(*) > 1"
        )
        assert cursor.fetchall() == []
    for project in Project.objects.all():
        live = IssueLease.objects.unreleased().with_live().filter(issue__project=project)
        assert sum(1 for lease in live if lease.is_live) <= project.agent_wip_limit
        assert live.count() <= project.agent_wip_limit  # every holder here is live


def assert_all_or_nothing(issue_id: int, paths: list[str]) -> set[str]:
    """The issue's claims, released or not, are exactly ``paths`` or nothing."""
    rows = sorted(FileClaim.objects.filter(issue_id=issue_id).values_list("path", flat=True))
    assert rows in ([], sorted(paths)), f"issue {issue_id}: partial claim {rows} of {paths}"
    return set(rows)
