"""What the server hands an agent's machine: the command as one executable file, the
guard as a standalone hook, and sessions that state their TTL."""

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.conf import settings

from coordination.models import ApiKey
from tests.conftest import make_client

pytestmark = pytest.mark.django_db


def test_the_command_is_one_executable_zipapp_of_the_package_and_needs_no_key(
    client, tmp_path: Path
):
    response = client.get("/agent/projektor")
    assert response.status_code == 200
    assert response.content.startswith(b"#!/usr/bin/env python3\n")
    names = zipfile.ZipFile(io.BytesIO(response.content)).namelist()
    assert "__main__.py" in names and "projektor_agent/cli.py" in names
    assert "projektor_agent/guard.py" in names
    assert client.get("/agent/projektor").content == response.content  # built once
    assert client.post("/agent/projektor").status_code == 405

    command = tmp_path / "projektor"
    command.write_bytes(response.content)
    command.chmod(0o755)
    helped = subprocess.run(
        [sys.executable, str(command), "run", "--help"], capture_output=True, text=True
    )
    assert helped.returncode == 0 and "--worktrees" in helped.stdout
    unconfigured = subprocess.run(
        [sys.executable, str(command), "whoami"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    assert unconfigured.returncode == 2
    assert "PROJEKTOR_URL (or git config projektor.url)" in unconfigured.stderr
    assert "Traceback" not in unconfigured.stderr


def test_the_guard_download_is_the_command_itself(client, tmp_path: Path):
    """Named ``pre-commit`` (as git runs it), the command is ``projektor guard pre-commit``."""
    download = client.get("/guard/pre-commit").content
    assert download == client.get("/agent/projektor").content
    hook = tmp_path / "pre-commit"
    hook.write_bytes(download)
    outside = subprocess.run(
        [sys.executable, "-I", "-S", str(hook)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert outside.returncode == 0  # not in a work tree: a warning, and the commit goes on
    assert "projektor pre-commit: warning: not inside a git work tree" in outside.stderr


def test_a_session_states_the_ttl_to_heartbeat_by(workspace):
    api = make_client(ApiKey.issue(workspace, "fleet")[1])
    response = api.post("/api/v1/sessions/", {"agent": "coder-1"}, format="json")
    assert response.status_code == 201
    assert response.json()["ttl_seconds"] == settings.PROJEKTOR_SESSION_TTL_SECONDS
    session = response.json()["id"]
    beat = api.post(f"/api/v1/sessions/{session}/heartbeat/")
    assert beat.json()["ttl_seconds"] == settings.PROJEKTOR_SESSION_TTL_SECONDS
