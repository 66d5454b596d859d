"""README "Your own repository in ten lines", run as printed: ``make -s key`` on the
server's database, the project and the issue over curl, the agent command fetched
from the server and ``projektor run`` in a clone of the reader's own, with a stand-in
for ``claude`` on the PATH (a script that commits a file, as an agent would); then a
person accepts the work on the issue's page."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from benchmarks import server as harness
from coordination.models import ApiKey, Issue
from tests.demo.conftest import served
from tests.readme import README, ROOT, run_shell, shell_blocks

pytestmark = pytest.mark.django_db(transaction=True)

STAND_IN = """#!/bin/sh
# claude -p PROMPT, as the README calls it: the work an agent would do, committed.
test "$1" = -p || exit 64
printf 'def health():\\n    return "ok"\\n' > health.py
git add health.py && git commit -qm "Add a health check" -m "$2"
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def readers_machine(home: Path) -> dict[str, str]:
    """A reader's shell: their own clone at ``~/src/my-app``, ``~/.local/bin`` and the
    agent CLI on the PATH, this checkout's database for ``make``, nothing of the test's
    settings or of the make that runs the suite."""
    repo = home / "src" / "my-app"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("My app\n")
    git(repo, "add", "README")
    git(repo, "-c", "user.name=Me", "-c", "user.email=me@example.com", "commit", "-qm", "Start")
    tools = home / "tools"
    tools.mkdir()
    (tools / "claude").write_text(STAND_IN)
    (tools / "claude").chmod(0o755)
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("MAKE", "MFLAGS", "PROJEKTOR_", "DJANGO_", "SECRET_KEY"))
    }
    return {
        **inherited,
        "HOME": str(home),
        "PATH": os.pathsep.join([str(home / ".local" / "bin"), str(tools), inherited["PATH"]]),
        "DATABASE_URL": harness.database_url(connection.settings_dict),
        "GIT_AUTHOR_NAME": "Me",
        "GIT_AUTHOR_EMAIL": "me@example.com",
        "GIT_COMMITTER_NAME": "Me",
        "GIT_COMMITTER_EMAIL": "me@example.com",
    }


def test_your_own_repository_in_ten_lines(tmp_path: Path) -> None:
    [lines] = shell_blocks("Your own repository in ten lines")
    assert len(lines.strip().splitlines()) <= 10
    env = readers_machine(tmp_path / "home")
    with served(tmp_path) as (url, _):
        done = run_shell(lines, url=url, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    [key] = ApiKey.objects.filter(workspace__slug="my-team")
    [issue] = Issue.objects.filter(workspace__slug="my-team", project__key="app")
    assert issue.status == Issue.Status.IN_REVIEW, (issue.status, done.stderr)
    assert "Add a health check" in issue.report["summary"]
    assert key.revoked_at is None
    assert "health.py" in git(tmp_path / "home" / "src" / "my-app", "show", "--name-only", "HEAD")
    # A person accepts it on the issue's page.
    admin = get_user_model().objects.create_superuser("admin", password="pw-of-the-test")
    person = Client(enforce_csrf_checks=True)
    person.force_login(admin)
    page = f"/workspaces/my-team/issues/{issue.pk}/"
    assert 'id="accept-form"' in person.get(page).content.decode()
    token = person.cookies["csrftoken"].value
    person.post(page, {"decision": "accept", "csrfmiddlewaretoken": token})
    issue.refresh_from_db()
    assert issue.status == Issue.Status.DONE


PRINTED_MANAGE_PY = re.compile(r"((?:[A-Z_]+=\S+ )*)([\w./]*python3?) manage\.py ([a-z_]+)")


def test_every_manage_py_command_the_readme_prints_starts_as_printed(tmp_path: Path) -> None:
    """Each ``manage.py`` command line the README prints, from this checkout, in a
    reader's shell (nothing of the suite's settings; a SECRET_KEY only under a block
    that exports one): its ``--help`` answers, so the interpreter, the settings and the
    command are all there as printed."""
    text = README.read_text(encoding="utf-8")
    env = readers_machine(tmp_path / "home")
    printed = list(PRINTED_MANAGE_PY.finditer(text))
    assert {match[3] for match in printed} >= {"seed_demo", "demo_fleet", "backup"}
    for match in printed:
        block = text[text.rfind("```", 0, match.start()) : match.start()]
        exported = {"SECRET_KEY": "from-the-block"} if "export SECRET_KEY" in block else {}
        assigned = dict(pair.split("=", 1) for pair in match[1].split())
        command = [match[2], "manage.py", match[3], "--help"]
        done = subprocess.run(
            command, cwd=ROOT, env={**env, **exported, **assigned}, capture_output=True, text=True
        )
        assert done.returncode == 0, (match[0], done.stderr[-2000:])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_production_lines_serve_answer_and_back_up_as_printed(tmp_path: Path) -> None:
    """ "In production", as an operator pastes it with their own values: the exports,
    ``make serve`` in one terminal, and in another the readiness check, the metrics and
    the backup. Only the placeholders (``...``), the port and the backup folder are the
    test's; ``make serve`` runs from this checkout on a SQLite file of its own."""
    (block,) = [b for b in shell_blocks("Five minutes as an operator") if "make serve" in b]
    port, backups = free_port(), tmp_path / "backups"
    backups.mkdir()
    lines = [line.split("#")[0].strip() for line in block.splitlines()]
    exports, serve, *after = [line for line in lines if line]
    assert serve == "make serve", block
    exports = exports.replace("SECRET_KEY=...", "SECRET_KEY=readme-production-secret")
    exports = exports.replace(
        "DATABASE_URL=postgres://...", f"DATABASE_URL=sqlite:///{tmp_path}/db"
    )
    assert "..." not in exports, exports
    env = {
        **readers_machine(tmp_path / "home"),
        "PROJEKTOR_BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": "2",
        "PROJEKTOR_STATIC_ROOT": str(tmp_path / "static"),
    }
    server = subprocess.Popen(
        ["bash", "-euc", f"{exports}\nexec {serve}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        script = "\n".join([exports, *after])
        script = script.replace("localhost:8000", f"localhost:{port}")
        script = script.replace("/backups/", f"{backups}/")
        answering = f"curl -sS -o /dev/null localhost:{port}/healthz 2>/dev/null"
        ready = f"until {answering}; do sleep 0.2; done"
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", f"timeout 240 bash -c '{ready}'\n{script}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        served_output = server.communicate(timeout=60)[0]
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:], served_output[-3000:])
    assert '"status":"ok"' in done.stdout.replace(" ", ""), done.stdout[:500]
    assert "projektor_" in done.stdout  # the metrics' own names
    assert [p.suffix for p in backups.iterdir()] == [".sqlite3"]
