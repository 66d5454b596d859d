"""A live server for the agent command's tests: gunicorn (the suite's harness) on a
database of its own (migrated as a new deployment's is), with a short session TTL;
an API client for the test's own calls; scratch git repositories; and the command run
as a real process.

The live database outlives each test (nothing flushes it): every test has a workspace
(and a key) of its own, so tests never see each other's claims, queues or work.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from django.db import connection

from benchmarks import server as harness

TTL = 5  # seconds: short, so that expiry and reclaim happen within a test
DEADLINE = 60.0  # seconds, for any condition a test waits on
NEVER_REFUSES = "1000000/min"
WORKSPACES = 160  # one per test: claims and queues are per workspace
SEED = f"""
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from coordination.models import ApiKey, Workspace
for number in range({WORKSPACES}):
    workspace = Workspace.objects.create(slug=f"agents-{{number}}", name=f"Agents {{number}}")
    print(ApiKey.issue(workspace, "fleet")[1])
"""
ROOT = Path(__file__).resolve().parents[2]
_names = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}{os.getpid() % 1000}x{next(_names)}"


def wait_until(condition: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    """Poll ``condition`` until it returns something truthy (and return that)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# --- the live server --------------------------------------------------------------------


def fresh_database(tmp: Path) -> tuple[str, Callable[[], None]]:
    """A database of the server's own, migrated as a new deployment's is, and its
    cleanup: a file on SQLite; on PostgreSQL, ``<name>_live_<pid>`` beside the configured
    database (so parallel runs never share it)."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{tmp / 'live.sqlite3'}", lambda: None
    import psycopg

    admin = {
        "host": settings["HOST"] or "127.0.0.1",
        "port": int(settings["PORT"] or 5432),
        "user": settings["USER"] or "postgres",
        "password": settings["PASSWORD"] or None,
        "dbname": "postgres",
        "autocommit": True,
    }
    # Named after the configured database and this process: two suites at once (or one
    # beside a killed run's leftovers) never drop each other's live database.
    base = os.environ.get("DATABASE_URL", "").rsplit("/", 1)[-1] or "projektor"
    name = f"{base}_live_{os.getpid()}"

    def drop() -> None:
        with psycopg.connect(**admin) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    drop()
    with psycopg.connect(**admin) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    auth = quote(admin["user"]) + (":" + quote(admin["password"]) if admin["password"] else "")
    return f"postgres://{auth}@{admin['host']}:{admin['port']}/{name}", drop


@dataclass
class Live:
    server: harness.Server
    keys: list[str]  # a fleet key of each workspace not used yet

    @property
    def url(self) -> str:
        return f"http://{self.server.host}:{self.server.port}"

    def api(self) -> Api:
        """A client of a workspace of its own."""
        return Api(self.url, self.keys.pop())


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("live")
    url, drop = fresh_database(tmp)
    env = harness.app_environment(
        {
            "DATABASE_URL": url,
            "SECRET_KEY": "agent-command-tests-only",
            "PROJEKTOR_SESSION_TTL_SECONDS": str(TTL),
            "PROJEKTOR_THROTTLE_KEY": NEVER_REFUSES,
            "PROJEKTOR_THROTTLE_ANON": NEVER_REFUSES,
            "REDIS_URL": None,
            # Up for the whole run beside the races: it holds no idle connection.
            "PROJEKTOR_CONN_MAX_AGE": "0",
        }
    )
    seeded = subprocess.run(
        [sys.executable, "-c", SEED], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert seeded.returncode == 0, seeded.stderr
    keys = seeded.stdout.split()
    try:
        # One worker starts soonest; its threads serve the runners' long polls.
        with harness.gunicorn(
            env=env, workers=1, threads=16, log_path=tmp / "gunicorn.log"
        ) as server:
            yield Live(server=server, keys=keys)
    finally:
        drop()


# --- the test's own API calls ---------------------------------------------------------------


@dataclass
class Api:
    url: str
    key: str
    http: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.Client(
            base_url=f"{self.url}/api/v1",
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=30,
        )

    def get(self, path: str, **params: Any) -> Any:
        response = self.http.get(path, params=params)
        assert response.status_code == 200, (path, response.status_code, response.text)
        return response.json()

    def post(self, path: str, body: Any = None, expect: int | None = None) -> Any:
        response = self.http.post(path, json=body)
        if expect is not None:
            assert response.status_code == expect, (path, response.status_code, response.text)
        return response.json() if response.content else None

    def project(self) -> str:
        key = unique("p")
        self.post("/projects/", {"key": key, "name": key, "agent_wip_limit": 10}, expect=201)
        return key

    def issue(self, project: str, title: str = "Add a feature", **fields: Any) -> dict[str, Any]:
        body = {"project": project, "title": title, "description": "Done when it works."}
        issue = self.post("/issues/", {**body, **fields}, expect=201)
        if issue["status"] != "todo":
            self.post(f"/issues/{issue['id']}/transition/", {"to": "todo"}, expect=200)
        return self.get(f"/issues/{issue['id']}/")

    def leases(self, issue: int) -> list[dict[str, Any]]:
        return self.get("/leases/", issue=issue)["results"]

    def messages(self, issue: int) -> list[str]:
        return [m["body"] for m in self.get("/messages/", scope=f"issue:{issue}")["results"]]

    def session(self, session: int) -> dict[str, Any]:
        return self.get(f"/sessions/{session}/")


@pytest.fixture
def api(live: Live) -> Iterator[Api]:
    client = live.api()
    yield client
    client.http.close()


# --- git and the command ------------------------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=cwd, env=clean_env(), capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, (args, result.stderr)
    return result.stdout.strip()


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without PROJEKTOR_* and GIT_* settings, with a git
    identity, so that the user's own configuration plays no part."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PROJEKTOR_", "GIT_")) and not name.lower().endswith("_proxy")
    }
    env.update(
        GIT_AUTHOR_NAME="Tester",
        GIT_AUTHOR_EMAIL="tester@example.com",
        GIT_COMMITTER_NAME="Tester",
        GIT_COMMITTER_EMAIL="tester@example.com",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_NOSYSTEM="1",
    )
    env.update(extra)
    return env


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A scratch repository with one commit on main."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("scratch\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('app')\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "Initial commit")
    return root


AGENT_SCRIPT = Path(__file__).with_name("scripted_agent.py")


@dataclass
class Runner:
    """``projektor run`` as a real process; its output in files."""

    process: subprocess.Popen[bytes]
    out: Path
    err: Path

    def wait(self, timeout: float = DEADLINE) -> int:
        return self.process.wait(timeout=timeout)

    @property
    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def projektor(live: Live, api: Api, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Start ``projektor ARGS`` in ``cwd`` as ``agent`` with the key of ``api``'s
    workspace: a Runner (``wait=False``) or its completed process."""
    started: list[Runner] = []

    def start(*args: str, cwd: Path, agent: str = "", wait: bool = True, **env: str) -> Any:
        environment = clean_env(PROJEKTOR_URL=live.url, PROJEKTOR_API_KEY=api.key)
        environment.update(env)
        if agent:
            environment["PROJEKTOR_AGENT"] = agent
        command = [sys.executable, "-m", "projektor_agent", *args]
        if wait:
            return subprocess.run(
                command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=120
            )
        name = unique("run")
        out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = subprocess.Popen(
                command, cwd=cwd, env=environment, stdout=stdout, stderr=stderr
            )
        runner = Runner(process, out, err)
        started.append(runner)
        return runner

    yield start
    for runner in started:
        runner.stop()


def agent_command(control: Path, *behaviour: str) -> list[str]:
    """The scripted agent's command line; it reports to and is steered by ``control``."""
    return ["--", sys.executable, str(AGENT_SCRIPT), str(control), *behaviour]


def released(control: Path) -> None:
    """Let the scripted agent finish its work."""
    (control / "go").write_text("")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


class Proxy:
    """A TCP forwarder to the live server that the test can take down and bring back:
    the server gone, as a runner on another machine sees it."""

    def __init__(self, target_port: int) -> None:
        import socket
        import threading

        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.is_up = threading.Event()
        self.is_up.set()
        self.open: list[Any] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def down(self) -> None:
        import socket

        self.is_up.clear()
        with self.lock:
            for sock in self.open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading it
                with contextlib.suppress(OSError):
                    sock.close()
            self.open.clear()

    def up(self) -> None:
        self.is_up.set()

    def close(self) -> None:
        self.down()
        self.listener.close()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.is_up.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self.lock:
                self.open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: Any, sink: Any) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.close()


@pytest.fixture
def proxy(live: Live) -> Iterator[Proxy]:
    forwarder = Proxy(live.server.port)
    yield forwarder
    forwarder.close()
