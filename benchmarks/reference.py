"""The reference calls: what one call costs the server, measured the same way each
time so that figures compare across commits and databases.

One gunicorn worker with one thread; one client on one kept-alive connection sending
the calls one after another; the server's CPU (``benchmarks.cpu``) read before and
after, divided by the calls. Three calls: ``GET /healthz`` (no database: the request
path alone), a session's heartbeat, and a cycle of claiming ten paths and releasing
them (two requests, counted as one cycle). Each is warmed up first (connections,
caches, the first query of each kind), then timed.

Then the server's floor (``benchmarks.floor_wsgi``): the same gunicorn and client,
``GET /healthz`` answered with the same bytes by a WSGI app that does nothing else. A
call's CPU above it is the app's; the floor itself moves with the machine and the
interpreter, and no code of Projektor can lower it.

Last, the same calls with no HTTP server (``benchmarks.in_process``): the app called
directly in a process with the server's environment, back to back and with a pause
after each call. A reference call costs about the floor, plus the app's own CPU, plus
what running after a pause costs the same code.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.db import connection

from benchmarks import in_process, load
from benchmarks.agent import API, REQUEST_TIMEOUT_SECONDS
from benchmarks.cpu import (
    PROFILE_DIR_VARIABLE,
    PROFILED_APP,
    collect_profiles,
    per_request_ms,
    server_cpu_seconds,
)
from benchmarks.server import THROTTLE_NEVER_REFUSES, Server, gunicorn, server_environment

CALLS = ("healthz", "heartbeat", "claim 10 + release")
# The server's CPU per call that the request path is held to (docs/speed.md, "The
# request's own cost"): on SQLite these; on PostgreSQL at most 1.3 times them.
SQLITE_TARGETS_MS = {"healthz": 0.4, "heartbeat": 1.1, "claim 10 + release": 4.0}
POSTGRESQL_FACTOR = 1.3
DEFAULT_REPETITIONS = 2000
QUICK_REPETITIONS = 200
WARM_UP_FRACTION = 10
FLOOR_APP = "benchmarks.floor_wsgi"
FLOOR_NAME = "the server's floor"
CLAIMED_PATHS = tuple(f"src/reference/module{n}.py" for n in range(10))


@dataclass(frozen=True)
class ServerFloor:
    """``GET /healthz`` answered by ``benchmarks.floor_wsgi`` under the same gunicorn and
    client: the CPU per call that no code of the app can cut."""

    repetitions: int
    cpu_ms: float | None
    wall_ms: float


@dataclass(frozen=True)
class ReferenceCall:
    name: str
    repetitions: int  # calls, or cycles of claim + release
    cpu_ms: float | None  # the server's CPU per call
    wall_ms: float  # the client's wall time per call
    target_ms: float  # the most CPU per call allowed on this database

    @property
    def met(self) -> bool | None:
        """Judged on the figure as ``--json`` reports it (to 4 decimals), so that a
        reader of 0.4 against a target of 0.4 reads "met", as the verdict says."""
        return None if self.cpu_ms is None else round(self.cpu_ms, 4) <= self.target_ms


def target_ms(name: str, vendor: str) -> float:
    factor = POSTGRESQL_FACTOR if vendor == "postgresql" else 1.0
    return round(SQLITE_TARGETS_MS[name] * factor, 2)


class Client:
    """One kept-alive connection; every answer must be the expected status."""

    def __init__(self, server: Server, raw_key: str) -> None:
        self.connection = http.client.HTTPConnection(
            server.host, server.port, timeout=REQUEST_TIMEOUT_SECONDS
        )
        self.headers = {
            "Authorization": f"Bearer {raw_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }

    def call(self, method: str, path: str, payload: Any = None, *, expect: int = 200) -> Any:
        body = json.dumps(payload).encode() if payload is not None else None
        self.connection.request(method, path, body=body, headers=self.headers)
        response = self.connection.getresponse()
        data = response.read()
        if response.status != expect:
            raise RuntimeError(f"{method} {path}: {response.status} {data[:300]!r}")
        return json.loads(data) if data else None

    def close(self) -> None:
        self.connection.close()


def run(
    bench: load.BenchWorkspace,
    repetitions: int,
    progress: Callable[[str], None],
    profile_dir: Path | None = None,
) -> list[ReferenceCall]:
    overrides = {PROFILE_DIR_VARIABLE: str(profile_dir)} if profile_dir else {}
    environment = {**server_environment(THROTTLE_NEVER_REFUSES), **overrides}
    app = PROFILED_APP if profile_dir else "projektor.wsgi"
    progress("Reference calls: gunicorn 1 worker × 1 thread, one kept-alive client")
    with (
        gunicorn(env=environment, workers=1, threads=1, app=app) as server,
        session(server, bench) as (client, session_id),
    ):
        calls = calls_of(client, session_id, bench.files_issues[0])
        figures = []
        for name in CALLS:
            figures.append(measure(server, name, calls[name], repetitions))
            progress(
                f"  {name:<24} {number(figures[-1].cpu_ms)} ms CPU,"
                f" {figures[-1].wall_ms:.2f} ms wall per call"
            )
            if profile_dir:
                collect_profiles(server, profile_dir, f"reference {name}")
    return figures


def server_floor(
    bench: load.BenchWorkspace, repetitions: int, progress: Callable[[str], None]
) -> ServerFloor:
    """The floor: gunicorn as the reference calls have it, serving ``FLOOR_APP``."""
    environment = server_environment(THROTTLE_NEVER_REFUSES)
    with gunicorn(env=environment, workers=1, threads=1, app=FLOOR_APP) as server:
        client = Client(server, bench.raw_key)  # the same request as healthz's
        try:
            floor = measure(server, "healthz", lambda: client.call("GET", "/healthz"), repetitions)
        finally:
            client.close()
    progress(
        f"  {FLOOR_NAME:<24} {number(floor.cpu_ms)} ms CPU, {floor.wall_ms:.2f} ms wall per call"
    )
    return ServerFloor(repetitions=repetitions, cpu_ms=floor.cpu_ms, wall_ms=floor.wall_ms)


def in_process_calls(
    bench: load.BenchWorkspace, repetitions: int, progress: Callable[[str], None]
) -> list[in_process.InProcessCall]:
    """The same calls with no HTTP server (``benchmarks.in_process``), in a child with
    the server's environment: back to back, and with a pause after each call."""
    progress("Reference calls in-process: the app called directly, no HTTP server")
    calls = in_process.run(
        bench.raw_key,
        bench.agents[0].name,
        bench.files_issues[0],
        repetitions,
        server_environment(THROTTLE_NEVER_REFUSES),
        settings.BASE_DIR,
    )
    for call in calls:
        progress(
            f"  {call.name:<24} {call.back_to_back_ms:.2f} ms CPU back to back,"
            f" {call.paused_ms:.2f} ms paused"
        )
    return calls


@contextmanager
def session(server: Server, bench: load.BenchWorkspace) -> Iterator[tuple[Client, int]]:
    client = Client(server, bench.raw_key)
    try:
        agent = {"agent": bench.agents[0].name}
        opened = client.call("POST", f"{API}/sessions/", agent, expect=201)
        try:
            yield client, int(opened["id"])
        finally:
            client.call("POST", f"{API}/sessions/{opened['id']}/end/")
    finally:
        client.close()


class Caller(Protocol):
    """A client of the reference calls: ``Client``, or ``benchmarks.in_process``'s."""

    def call(self, method: str, path: str, payload: Any = None, *, expect: int = 200) -> Any: ...


def calls_of(client: Caller, session_id: int, issue: int) -> dict[str, Callable[[], Any]]:
    """Each reference call, by name, as ``client`` sends it."""
    return {
        "healthz": lambda: client.call("GET", "/healthz"),
        "heartbeat": lambda: client.call("POST", f"{API}/sessions/{session_id}/heartbeat/"),
        "claim 10 + release": lambda: claim_and_release(client, issue, session_id),
    }


def claim_and_release(client: Caller, issue: int, session_id: int) -> None:
    claim = {"issue": issue, "session": session_id, "paths": list(CLAIMED_PATHS)}
    client.call("POST", f"{API}/file-claims/", claim, expect=201)
    client.call("POST", f"{API}/file-claims/release/", {"issue": issue, "session": session_id})


def warm_up(call: Callable[[], Any], repetitions: int) -> None:
    """A tenth of the timed calls first: connections, caches, each query's first run."""
    for _ in range(max(1, repetitions // WARM_UP_FRACTION)):
        call()


def measure(server: Server, name: str, call: Callable[[], Any], repetitions: int) -> ReferenceCall:
    warm_up(call, repetitions)
    before, started = server_cpu_seconds(server), time.perf_counter()
    for _ in range(repetitions):
        call()
    wall, after = time.perf_counter() - started, server_cpu_seconds(server)
    return ReferenceCall(
        name=name,
        repetitions=repetitions,
        cpu_ms=per_request_ms(before, after, repetitions),
        wall_ms=wall * 1000 / repetitions,
        target_ms=target_ms(name, connection.vendor),
    )


def number(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"
