"""Management commands and the embedded-database configuration."""

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from coordination.models import ApiKey, Issue, Workspace, hash_api_key

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[4]


def test_create_api_key_creates_the_workspace_and_prints_only_the_key():
    out = StringIO()
    call_command("create_api_key", "new-team", stdout=out)
    raw = out.getvalue().strip()
    assert "\n" not in raw and raw.startswith(ApiKey.PREFIX)
    key = ApiKey.objects.get()
    assert key.workspace.slug == "new-team" and key.key_hash == hash_api_key(raw)


def test_create_api_key_reuses_an_existing_workspace(workspace):
    call_command("create_api_key", "acme", stdout=StringIO())
    assert Workspace.objects.count() == 1 and ApiKey.objects.get().workspace == workspace


def test_demo_key_works_against_the_api(client):
    out = StringIO()
    call_command("seed_demo", "--agents", "4", "--days", "2", stdout=out)
    raw = next(
        line.split(":", 1)[1].strip() for line in out.getvalue().splitlines() if "API key" in line
    )
    response = client.get("/api/v1/issues/", headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 200
    assert response.json()["count"] == Issue.objects.filter(workspace__slug="demo").count() > 0
    call_command("seed_demo", stdout=StringIO())  # running it twice is harmless
    assert Issue.objects.filter(workspace__slug="demo").count() == response.json()["count"]


def test_embedded_sqlite_runs_in_wal_with_immediate_transactions(tmp_path):
    """Writers queue on the busy timeout instead of failing on lock upgrade."""
    probe = (
        "from django.db import connection as c\n"
        "cur = c.cursor(); cur.execute('PRAGMA journal_mode'); print(cur.fetchone()[0])\n"
        "options = c.settings_dict['OPTIONS']\n"
        "print(options['transaction_mode'], options['timeout'])\n"
    )
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'p.sqlite3'}", "DEBUG": "true"}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == ["wal", "IMMEDIATE", "20"]


def test_openapi_schema_generates_without_warnings():
    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    assert "/api/v1/issues/{id}/claim/" in out.getvalue()
