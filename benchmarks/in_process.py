"""The reference calls with no HTTP server: Projektor's WSGI app called in-process.

``manage.py bench`` runs this module as a child process with the server's environment
(``benchmarks.server.server_environment``: the same settings, database, throttle and
multiprocess metrics as gunicorn's worker; the request log goes to a file, as
gunicorn's does). It calls ``projektor.wsgi.application`` directly with each
reference call's requests (the method, path, headers and body the bench's client
sends) and reads its own CPU (``time.process_time``) around them. Each call is timed
twice: back to back, and with a pause after each call (``PAUSE_SECONDS``), as a server
has between one client's calls.

What it shows beside the reference calls: the app's own CPU with no HTTP server, and
what a pause costs the same code. After a pause the processor resumes with caches and
predictors that other work has used meanwhile; on this project's shared 2-core machine
that adds 0.1 to 0.2 ms to a call
(docs/speed.md, "The interpreter and the server's floor").
A reference call is roughly the floor plus the paused figure.

Input on stdin (JSON): the bench workspace's ``raw_key``, an ``agent`` name, the
``issue`` to claim paths for, and ``repetitions``; output on stdout (JSON): for each
call, ``back_to_back_ms`` and ``paused_ms``.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.server import HOST  # the host the server's ALLOWED_HOSTS names

PAUSE_SECONDS = 0.001
CHILD_TIMEOUT_SECONDS = 600.0  # 2,000 of each call on a slow day: a minute or two


@dataclass(frozen=True)
class InProcessCall:
    name: str
    repetitions: int
    back_to_back_ms: float  # CPU per call, the calls one after another
    paused_ms: float  # CPU per call, with PAUSE_SECONDS after each


class InProcessClient:
    """The bench's ``reference.Client`` without a socket: the same request, handed to
    the WSGI app; every answer must be the expected status."""

    def __init__(self, application: Callable[..., Iterable[bytes]], raw_key: str) -> None:
        self.application = application
        self.headers = {
            "HTTP_HOST": f"{HOST}:8000",
            "HTTP_AUTHORIZATION": f"Bearer {raw_key}",
            "CONTENT_TYPE": "application/json",
            "HTTP_ACCEPT": "application/json",
        }

    def call(self, method: str, path: str, payload: Any = None, *, expect: int = 200) -> Any:
        body = json.dumps(payload).encode() if payload is not None else b""
        environ = {
            **self.headers,
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "CONTENT_LENGTH": str(len(body)),
            "SERVER_NAME": HOST,
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": HOST,
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
        }
        started: list[str] = []
        answer = self.application(environ, lambda status, headers, *_: started.append(status))
        try:
            data = b"".join(answer)
        finally:
            close = getattr(answer, "close", None)
            if close is not None:
                close()  # as a server does: Django's request_finished
        status = int(started[0].split(" ", 1)[0])
        if status != expect:
            raise RuntimeError(f"{method} {path}: {status} {data[:300]!r}")
        return json.loads(data) if data else None


def cpu_per_call_ms(call: Callable[[], Any], repetitions: int, pause: float) -> float:
    started = time.process_time()
    for _ in range(repetitions):
        call()
        if pause:
            time.sleep(pause)  # the sleep's own CPU is a system call's: microseconds
    return (time.process_time() - started) * 1000 / repetitions


def measure_here(raw_key: str, agent: str, issue: int, repetitions: int) -> dict[str, Any]:
    """In the child: open a session, time each reference call, end the session."""
    import django

    django.setup()
    from benchmarks.agent import API
    from benchmarks.reference import CALLS, calls_of, warm_up
    from projektor.wsgi import application

    client = InProcessClient(application, raw_key)
    opened = client.call("POST", f"{API}/sessions/", {"agent": agent}, expect=201)
    try:
        calls = calls_of(client, int(opened["id"]), issue)
        figures = {}
        for name in CALLS:
            # Alive before each timed loop, untimed: on a busy machine a call's thousands
            # of repetitions outlast the session's TTL (a claim then answers 409).
            calls["heartbeat"]()
            warm_up(calls[name], repetitions)
            back_to_back = cpu_per_call_ms(calls[name], repetitions, 0.0)
            calls["heartbeat"]()
            paused = cpu_per_call_ms(calls[name], repetitions, PAUSE_SECONDS)
            figures[name] = {"back_to_back_ms": back_to_back, "paused_ms": paused}
        return figures
    finally:
        client.call("POST", f"{API}/sessions/{opened['id']}/end/")


def run(
    raw_key: str, agent: str, issue: int, repetitions: int, environment: dict[str, str], cwd: Path
) -> list[InProcessCall]:
    """In the bench: the child, with the server's ``environment``; its figures."""
    request = {"raw_key": raw_key, "agent": agent, "issue": issue, "repetitions": repetitions}
    with (
        tempfile.TemporaryDirectory(prefix="projektor-in-process-") as metrics,
        tempfile.TemporaryFile() as log,
    ):
        child = subprocess.run(
            [sys.executable, "-m", "benchmarks.in_process"],
            input=json.dumps(request).encode(),
            stdout=subprocess.PIPE,
            stderr=log,  # the request log, as gunicorn's goes to its log file
            cwd=cwd,
            env={**environment, "PROMETHEUS_MULTIPROC_DIR": metrics},
            timeout=CHILD_TIMEOUT_SECONDS,
            check=False,
        )
        if child.returncode != 0:
            log.seek(0)
            raise RuntimeError(f"the in-process calls failed: {log.read()[-2000:]!r}")
    figures = json.loads(child.stdout)
    return [
        InProcessCall(
            name=name,
            repetitions=repetitions,
            back_to_back_ms=figure["back_to_back_ms"],
            paused_ms=figure["paused_ms"],
        )
        for name, figure in figures.items()
    ]


def main() -> None:
    request = json.load(sys.stdin)
    figures = measure_here(
        request["raw_key"], request["agent"], int(request["issue"]), int(request["repetitions"])
    )
    json.dump(figures, sys.stdout)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "projektor.settings")
    main()
