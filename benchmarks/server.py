"""The app under gunicorn, as a production deployment on this machine would run it:
the one harness of the bench and of the tests that need real app processes
(tests/faults, the metrics, the live event streams, keys and throttles across workers,
the agent command).

Its interface, kept stable for those callers:

- ``gunicorn(env=..., workers=..., threads=..., log_path=..., app=...)``: a context manager that
  starts the server, waits until every worker is up and one answers, yields a
  ``Server`` and stops it (gracefully, else by killing its process group) on exit;
- ``Server``: ``host``, ``port``, ``log_path``, ``workers``, ``threads``, ``process``;
  ``alive()``, ``worker_pids()`` and ``log_tail()``;
- ``app_environment(overrides)``: this process's environment in production mode
  (``None`` in ``overrides`` unsets a variable), to pass as ``env``;
- ``environment_on_this_database(overrides)``: the same, for a server sharing this
  process's database (the test database under pytest), session TTL, and never
  refusing for a throttle; ``database_url(settings_dict)`` names that database.

gthread workers (keep-alive works; the sync worker closes every connection),
``2 × cores + 1`` workers (gunicorn's guidance) and 4 working threads each by default
(and the waiters' threads beside them, gunicorn.conf.py). The
listening socket is made here on a free loopback port and handed to gunicorn
(``fd://``), so no other process can take the port between choosing and binding.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.db import connection

DEFAULT_WORKERS = 2 * (os.cpu_count() or 1) + 1
DEFAULT_THREADS = 4
HOST = "127.0.0.1"
# Longer than an agent waits at the start barrier for the others, so the server
# does not close an agent's kept-alive connection before its first timed request.
KEEPALIVE_SECONDS = 30
LISTEN_BACKLOG = 2048  # gunicorn's default
# Workers import Django; on a busy machine that alone can take many seconds.
STARTUP_TIMEOUT_SECONDS = 120.0
# gunicorn's own graceful stop gives up before ours does, then kills its workers.
GRACEFUL_TIMEOUT_SECONDS = 5
STOP_TIMEOUT_SECONDS = 15.0
PROBE_TIMEOUT_SECONDS = 5
# A page outside the API: probing it counts against no rate limit.
PROBE_PATH = "/login/"
PROC = Path("/proc")
LOG_TAIL_LINES = 40
# One line per request (its logger's name is in each, text or JSON): the bench makes
# thousands, which would bury an error's traceback in the log's tail.
REQUEST_LOG_MARK = "projektor.request"

# "On" for the bench: counted (the counter's cost is part of every request) but
# never refusing; "off": not counted at all (settings.env_rate).
THROTTLE_NEVER_REFUSES = "100000000/min"
THROTTLE_OFF = "off"
# Only for a server started without one; the command's own process has its own.
BENCH_SECRET_KEY = "projektor-bench-only-secret-key-not-for-any-deployment"


class ServerFailed(Exception):
    """gunicorn did not start (the message carries its log's tail)."""


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    log_path: Path
    workers: int
    threads: int
    process: subprocess.Popen[bytes]

    def alive(self) -> bool:
        return self.process.poll() is None

    def worker_pids(self) -> list[int]:
        """The master's live workers (a killed one is replaced under a new pid)."""
        return children(self.process.pid) if self.alive() else []

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        telling = [line for line in text.splitlines() if REQUEST_LOG_MARK not in line]
        return "\n".join(telling[-lines:])


def app_environment(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """This process's environment (DATABASE_URL, the session TTL, ...) in production
    mode, serving the loopback host whatever ALLOWED_HOSTS says here, with
    ``overrides`` (None: unset)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "projektor.settings",
        "SECRET_KEY": os.environ.get("SECRET_KEY") or BENCH_SECRET_KEY,
        "DEBUG": "false",
        "ALLOWED_HOSTS": f"{HOST},localhost",
    }
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def database_url(settings_dict: Mapping[str, Any]) -> str:
    """The ``DATABASE_URL`` of a Django database (a ``DATABASES`` entry, such as
    ``connection.settings_dict``): PostgreSQL, or an SQLite file."""
    if "sqlite" in settings_dict["ENGINE"]:
        return f"sqlite:///{settings_dict['NAME']}"
    auth = quote(settings_dict["USER"] or "postgres")
    if settings_dict["PASSWORD"]:
        auth += ":" + quote(settings_dict["PASSWORD"])
    host, port = settings_dict["HOST"] or HOST, settings_dict["PORT"] or 5432
    return f"postgres://{auth}@{host}:{port}/{settings_dict['NAME']}"


def environment_on_this_database(
    overrides: Mapping[str, str | None] | None = None,
) -> dict[str, str]:
    """``app_environment`` for a server beside this process: on its database (under
    pytest, the test database; what a test commits there, the server sees), with its
    session TTL, neither throttle ever refusing, no waiting threads, then ``overrides``."""
    return app_environment(
        {
            "DATABASE_URL": database_url(connection.settings_dict),
            "PROJEKTOR_SESSION_TTL_SECONDS": str(settings.PROJEKTOR_SESSION_TTL_SECONDS),
            "PROJEKTOR_THROTTLE_KEY": THROTTLE_NEVER_REFUSES,
            "PROJEKTOR_THROTTLE_ANON": THROTTLE_NEVER_REFUSES,
            # No threads for waiters unless asked: the parallel tests' servers share
            # PostgreSQL's 100 connections, and each thread may keep one.
            "PROJEKTOR_WAITING_THREADS": "0",
            **(overrides or {}),
        }
    )


def server_environment(throttle_key: str) -> dict[str, str]:
    """The bench's server: its key throttle, and an address throttle that never refuses."""
    return app_environment(
        {"PROJEKTOR_THROTTLE_KEY": throttle_key, "PROJEKTOR_THROTTLE_ANON": THROTTLE_NEVER_REFUSES}
    )


def answers(host: str, port: int) -> bool:
    """Any HTTP answer means a worker is serving."""
    connection = http.client.HTTPConnection(host, port, timeout=PROBE_TIMEOUT_SECONDS)
    try:
        connection.request("GET", PROBE_PATH)
        connection.getresponse().read()
        return True
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


@contextmanager
def gunicorn(
    *,
    env: Mapping[str, str],
    workers: int = DEFAULT_WORKERS,
    threads: int = DEFAULT_THREADS,
    log_path: Path | None = None,
    app: str = "projektor.wsgi",
) -> Iterator[Server]:
    """Start gunicorn with ``env`` (see ``app_environment``), wait until all its
    workers are up and one answers, and stop it on exit. The log goes to
    ``log_path``, else to a temporary file removed at the end. gunicorn reads the
    repository's gunicorn.conf.py (multiprocess metrics, the start checks); the
    flags below win over its settings. ``app`` is the WSGI module gunicorn serves
    (the bench's profiled one under ``--profile``)."""
    collect_static_files()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((HOST, 0))
    listener.listen(LISTEN_BACKLOG)
    listener.set_inheritable(True)
    host, port = listener.getsockname()
    temporary = log_path is None
    if log_path is None:
        descriptor, name = tempfile.mkstemp(prefix="projektor-gunicorn-", suffix=".log")
        os.close(descriptor)
        log_path = Path(name)
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        app,
        f"--bind=fd://{listener.fileno()}",
        "--worker-class=gthread",
        f"--workers={workers}",
        f"--keep-alive={KEEPALIVE_SECONDS}",
        f"--graceful-timeout={GRACEFUL_TIMEOUT_SECONDS}",
        "--error-logfile=-",
        "--log-level=warning",
    ]
    try:
        with log_path.open("wb") as log_file:
            process = subprocess.Popen(
                command,
                cwd=settings.BASE_DIR,
                # gunicorn.conf.py runs these working threads, and the waiters' beside them.
                env={**env, "PROJEKTOR_THREADS": str(threads)},
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                pass_fds=(listener.fileno(),),
                start_new_session=True,  # its own process group: the workers go with it
            )
    finally:
        listener.close()  # gunicorn holds it now; connections fail fast once it stops
    server = Server(
        host=host, port=port, log_path=log_path, workers=workers, threads=threads, process=process
    )
    try:
        wait_until_serving(server)
        yield server
    finally:
        stop(server)
    if temporary:
        log_path.unlink(missing_ok=True)


def collect_static_files() -> None:
    """As a deployment does before it starts (gunicorn.conf.py refuses to otherwise);
    only when some are missing, since collecting takes seconds."""
    from django.core.management import call_command

    from projektor.operations.checks import uncollected_static_files

    if uncollected_static_files():
        call_command("collectstatic", interactive=False, verbosity=0)


def wait_until_serving(server: Server) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if not server.alive():
            raise ServerFailed(
                f"gunicorn exited with status {server.process.returncode}"
                f" (log {server.log_path}):\n{server.log_tail()}"
            )
        all_up = not PROC.is_dir() or len(server.worker_pids()) == server.workers
        if all_up and answers(server.host, server.port):
            return
        time.sleep(0.1)
    raise ServerFailed(
        f"gunicorn did not answer within {STARTUP_TIMEOUT_SECONDS:.0f} s"
        f" (log {server.log_path}):\n{server.log_tail()}"
    )


def stop(server: Server) -> None:
    """Graceful stop (SIGTERM: workers finish their requests), else kill its group."""
    process = server.process
    for pid in server.worker_pids():  # a worker left frozen (SIGSTOP) never stops
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
            return
        except subprocess.TimeoutExpired:
            pass
    # Not stopped in time, or the master died first and left its workers: the
    # group started above, and only it.
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux's /proc; none elsewhere)."""
    found = []
    for stat in PROC.glob("[0-9]*/stat"):
        try:
            after_name = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while we looked
        state, parent = after_name[0], int(after_name[1])
        if parent == pid and state not in ("Z", "X"):
            found.append(int(stat.parent.name))
    return sorted(found)
