"""The app under gunicorn, as a production deployment on this machine would run it.

gthread workers (keep-alive works; the sync worker closes every connection),
``2 × cores + 1`` workers (gunicorn's guidance) and 4 threads each by default. The
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

DEFAULT_WORKERS = 2 * (os.cpu_count() or 1) + 1
DEFAULT_THREADS = 4
# Longer than an agent waits at the start barrier for the others, so the server
# does not close an agent's kept-alive connection before its first timed request.
KEEPALIVE_SECONDS = 30
LISTEN_BACKLOG = 2048  # gunicorn's default
STARTUP_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 15.0
LOG_TAIL_LINES = 40
# Django logs every 4xx answer as a warning ("Conflict: /api/v1/file-claims/"): the
# bench makes thousands, which would bury an error's traceback in the log's tail.
ROUTINE_LOG_LINES = ("Conflict: ", "Not Found: ", "Bad Request: ")

# "On" for the bench: counted (the counter's cost is part of every request) but
# never refusing; "off": not counted at all (settings.env_rate).
THROTTLE_NEVER_REFUSES = "100000000/min"
THROTTLE_OFF = "off"
# Only for a bench started without one; the command's own process has its own.
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
    throttle_key: str

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        telling = [line for line in text.splitlines() if not line.startswith(ROUTINE_LOG_LINES)]
        return "\n".join(telling[-lines:])


def server_environment(throttle_key: str) -> dict[str, str]:
    """The command's environment (DATABASE_URL, the session TTL, ...), with the
    bench's throttle limits, production mode and hosts the bench's requests name."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "projektor.settings",
        "SECRET_KEY": os.environ.get("SECRET_KEY") or BENCH_SECRET_KEY,
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "PROJEKTOR_THROTTLE_KEY": throttle_key,
        "PROJEKTOR_THROTTLE_ANON": THROTTLE_NEVER_REFUSES,
    }


def answers(host: str, port: int) -> bool:
    """Any HTTP answer (a 401 without a key) means a worker is serving."""
    connection = http.client.HTTPConnection(host, port, timeout=2)
    try:
        connection.request("GET", "/api/v1/workflow/")
        connection.getresponse().read()
        return True
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


@contextmanager
def gunicorn(*, workers: int, threads: int, throttle_key: str) -> Iterator[Server]:
    """Start gunicorn, wait until it answers, and stop it (SIGTERM, then kill) on exit."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(LISTEN_BACKLOG)
    listener.set_inheritable(True)
    host, port = listener.getsockname()
    log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept open for the child
        prefix="projektor-bench-gunicorn-", suffix=".log", delete=False
    )
    server = Server(
        host=host,
        port=port,
        log_path=Path(log_file.name),
        workers=workers,
        threads=threads,
        throttle_key=throttle_key,
    )
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "projektor.wsgi",
        f"--bind=fd://{listener.fileno()}",
        "--worker-class=gthread",
        f"--workers={workers}",
        f"--threads={threads}",
        f"--keep-alive={KEEPALIVE_SECONDS}",
        "--error-logfile=-",
        "--log-level=warning",
    ]
    try:
        process = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=server_environment(throttle_key),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            pass_fds=(listener.fileno(),),
            start_new_session=True,  # its own process group: the workers go with it
        )
    finally:
        listener.close()  # gunicorn holds it now; connections fail fast once it stops
        log_file.close()
    try:
        wait_until_serving(process, server)
        yield server
    finally:
        stop(process)
    server.log_path.unlink(missing_ok=True)


def wait_until_serving(process: subprocess.Popen[bytes], server: Server) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerFailed(
                f"gunicorn exited with status {process.returncode} (log {server.log_path}):\n"
                + server.log_tail()
            )
        if answers(server.host, server.port):
            return
        time.sleep(0.1)
    raise ServerFailed(
        f"gunicorn did not answer within {STARTUP_TIMEOUT_SECONDS:.0f} s"
        f" (log {server.log_path}):\n{server.log_tail()}"
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    """Graceful stop (SIGTERM: workers finish their requests), else kill its group."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the group started above, and only it
        process.wait()
