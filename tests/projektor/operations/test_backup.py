"""``manage.py backup``: taken while a writer thread claims files, restored, checked."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from tests.projektor.test_settings import ROOT

pytestmark = pytest.mark.django_db


def manage(*args: str, database: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "SECRET_KEY": "backup-test"}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="the command copies SQLite; PostgreSQL: pg_dump"
)


@sqlite_only
def test_a_backup_taken_while_files_are_claimed_restores_and_checks(tmp_path):
    live = tmp_path / "live.sqlite3"
    connection.ensure_connection()
    # A migrated database file, quicker than migrating one: the test database's schema
    # (tables, indexes, triggers) and rows, as SQL.
    with sqlite3.connect(live) as target:
        target.executescript(";\n".join(connection.connection.iterdump()))
    backup = tmp_path / "backup.sqlite3"

    wrote = manage("-m", "tests.projektor.operations.backup_writer", str(backup), database=live)
    assert wrote.returncode == 0, wrote.stderr[-3000:]
    counts = json.loads(wrote.stdout.strip().splitlines()[-1])
    assert counts["errors"] == []
    assert counts["final"] > counts["after"]  # the writer went on after the backup

    restored = tmp_path / "restored.sqlite3"
    shutil.copy(backup, restored)  # a restore is a copy back into place
    checked = manage("manage.py", "check", "--database", "default", database=restored)
    assert checked.returncode == 0, checked.stderr
    migrated = manage("manage.py", "migrate", "--check", database=restored)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    with sqlite3.connect(restored) as copy:
        assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        (claims,) = copy.execute("SELECT count(*) FROM issue_file_claims").fetchone()
        (issues,) = copy.execute("SELECT count(*) FROM coordination_issue").fetchone()
    # One moment of the database: whole claims only (all or nothing), made between
    # the backup's start and its end.
    assert claims % 3 == 0
    assert counts["before"] <= claims // 3 <= counts["after"]
    assert issues in (claims // 3, claims // 3 + 1)  # an issue is made just before its claim


@sqlite_only
def test_a_backup_never_overwrites_a_file(tmp_path):
    existing = tmp_path / "kept.sqlite3"
    existing.write_text("precious")
    with pytest.raises(CommandError, match="exists already"):
        call_command("backup", str(existing))
    assert existing.read_text() == "precious"


@pytest.mark.postgres
def test_postgresql_is_backed_up_with_pg_dump(tmp_path):
    with pytest.raises(CommandError, match="pg_dump"):
        call_command("backup", str(tmp_path / "x"))
    assert not (tmp_path / "x").exists()
