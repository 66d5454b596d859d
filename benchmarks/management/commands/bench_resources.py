"""Resources over HTTP (invariant 20 (resources are counted)), under gunicorn as deployed.

Three runs, each ``--seconds`` long, on a throw-away workspace:

1. ``cycles``: one agent acquiring and releasing one unit, back to back: cycles per
   second and each cycle's latency.
2. ``contention``: ``--agents`` agents sharing a resource of capacity 2, each acquiring
   with ``wait`` (in line), holding ``--hold-ms``, releasing, again: the time each
   call waited for its units (p50, p95) and grants per second.
3. ``waiters``: the heartbeat load (``--agents`` agents heartbeating back to back) alone,
   then again while ``--waiters`` calls wait in one resource's line (its unit held
   throughout): heartbeats per second and their p95 in both, so a wait that pinned the
   server's threads would show as heartbeats lost.

Prints the figures; ``--json PATH`` writes them too.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from benchmarks.agent import HttpClient, HttpTarget
from benchmarks.server import THROTTLE_NEVER_REFUSES, environment_on_this_database, gunicorn
from coordination.models import ApiKey, Workspace
from coordination.services import logs, resources


@dataclass
class Latencies:
    values: list[float] = field(default_factory=list)  # seconds

    def add(self, seconds: float) -> None:
        self.values.append(seconds)

    def summary(self) -> dict[str, float]:
        if not self.values:
            return {"count": 0, "p50_ms": 0.0, "p95_ms": 0.0, "max_ms": 0.0}
        ordered = sorted(self.values)
        return {
            "count": len(ordered),
            "p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2),
            "max_ms": round(ordered[-1] * 1000, 2),
        }


class Run:
    """Clients in threads, each with its own kept-alive connection, for a while."""

    def __init__(self, target: HttpTarget) -> None:
        self.target = target
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def client(self) -> HttpClient:
        return HttpClient(self.target)

    def call(self, client: HttpClient, method: str, path: str, body: Any = None) -> Any:
        status, data = client.call(method, path, body)
        if status >= 500:
            with self.lock:
                self.errors.append(f"{method} {path}: {status} {data[:200]!r}")
        return status, (json.loads(data) if data else None)

    def session(self, client: HttpClient, agent: str) -> int:
        status, body = self.call(client, "POST", "/sessions/", {"agent": agent})
        assert status == 201, body
        return int(body["id"])

    def threads(self, count: int, work: Callable[[int], None]) -> None:
        threads = [threading.Thread(target=work, args=(index,)) for index in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


class Command(BaseCommand):
    help = "Resources over HTTP: acquire/release cycles, waits under contention, waiters."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seconds", type=float, default=8.0)
        parser.add_argument("--agents", type=int, default=16)
        parser.add_argument("--waiters", type=int, default=50)
        parser.add_argument("--hold-ms", type=float, default=20.0)
        parser.add_argument("--json", type=Path, default=None)
        parser.add_argument(
            "--quick", action="store_true", help="1 s runs, 4 agents, 10 waiters (a check)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["quick"]:
            options.update(seconds=1.0, agents=4, waiters=10)
        workspace = Workspace.objects.create(slug=f"bench-{uuid.uuid4().hex[:8]}", name="Bench")
        try:
            _, raw = ApiKey.issue(workspace, "bench")
            for name, capacity in (("cycle", 1), ("shared", 2), ("held", 1)):
                resources.create_resource(workspace=workspace, name=name, capacity=capacity)
            # The server on this process's database (the test database under pytest).
            env = environment_on_this_database(
                {
                    "PROJEKTOR_THROTTLE_KEY": THROTTLE_NEVER_REFUSES,
                    "PROJEKTOR_WAITING_THREADS": "32",
                }
            )
            with gunicorn(env=env) as server:
                self.stdout.write(f"gunicorn: {server.workers} workers × {server.threads} threads")
                target = HttpTarget(host=server.host, port=server.port, raw_key=raw)
                figures = self.measure(Run(target), options)
        finally:
            logs.delete_workspace(workspace)
        for line in report(figures):
            self.stdout.write(line)
        if options["json"]:
            options["json"].write_text(json.dumps(figures, indent=2))

    def measure(self, run: Run, options: dict[str, Any]) -> dict[str, Any]:
        seconds, agents = options["seconds"], options["agents"]
        figures: dict[str, Any] = {"seconds": seconds, "agents": agents}
        figures["cycles"] = cycles(run, seconds)
        figures["contention"] = contention(run, seconds, agents, options["hold_ms"] / 1000)
        figures["heartbeats_alone"] = heartbeats(run, seconds, agents)
        figures["heartbeats_beside_waiters"] = beside_waiters(
            run, seconds, agents, options["waiters"]
        )
        figures["server_errors"] = run.errors[:10]
        figures["server_error_count"] = len(run.errors)
        return figures


def cycles(run: Run, seconds: float) -> dict[str, Any]:
    client = run.client()
    session = run.session(client, "cycler")
    latencies = Latencies()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        status, body = run.call(client, "POST", "/resources/cycle/acquire/", {"session": session})
        assert status == 201, body
        status, body = run.call(client, "POST", "/resources/cycle/release/", {"session": session})
        assert status == 200, body
        latencies.add(time.perf_counter() - started)
    summary = latencies.summary()
    return {**summary, "per_second": round(summary["count"] / seconds, 1)}


def contention(run: Run, seconds: float, agents: int, hold: float) -> dict[str, Any]:
    waits = Latencies()
    refused = [0]
    end = time.monotonic() + seconds

    def agent(index: int) -> None:
        client = run.client()
        session = run.session(client, f"contender-{index}")
        while time.monotonic() < end:
            started = time.perf_counter()
            status, body = run.call(
                client, "POST", "/resources/shared/acquire/", {"session": session, "wait": 60}
            )
            waited = time.perf_counter() - started
            if status != 201:
                with run.lock:
                    refused[0] += 1
                continue
            with run.lock:
                waits.add(waited)
            time.sleep(hold)  # the agent's test run, holding its database
            run.call(client, "POST", "/resources/shared/release/", {"session": session})

    run.threads(agents, agent)
    summary = waits.summary()
    return {
        **{f"wait_{name}": value for name, value in summary.items()},
        "grants_per_second": round(summary["count"] / seconds, 1),
        "refused": refused[0],
    }


def heartbeats(run: Run, seconds: float, agents: int) -> dict[str, Any]:
    latencies = Latencies()
    statuses: Counter[int] = Counter()
    end = time.monotonic() + seconds

    def agent(index: int) -> None:
        client = run.client()
        session = run.session(client, f"beater-{index}")
        while time.monotonic() < end:
            started = time.perf_counter()
            status, _ = run.call(client, "POST", f"/sessions/{session}/heartbeat/")
            with run.lock:
                latencies.add(time.perf_counter() - started)
                statuses[status] += 1

    run.threads(agents, agent)
    summary = latencies.summary()
    return {
        **summary,
        "per_second": round(summary["count"] / seconds, 1),
        "statuses": {str(code): n for code, n in sorted(statuses.items())},
    }


def beside_waiters(run: Run, seconds: float, agents: int, waiters: int) -> dict[str, Any]:
    """Heartbeats while ``waiters`` calls wait for a unit held throughout."""
    holder_client = run.client()
    holder = run.session(holder_client, "holder")
    status, body = run.call(holder_client, "POST", "/resources/held/acquire/", {"session": holder})
    assert status == 201, body
    wait_seconds = min(60.0, seconds + 10)
    answered: list[str] = []
    ready = threading.Barrier(waiters + 1)

    def waiter(index: int) -> None:
        client = run.client()
        session = run.session(client, f"waiter-{index}")
        ready.wait()
        started = time.monotonic()
        status, body = run.call(
            client,
            "POST",
            "/resources/held/acquire/",
            {"session": session, "wait": wait_seconds},
        )
        with run.lock:
            answered.append(f"{status} {body.get('code', '')} {time.monotonic() - started:.0f} s")

    threads = [threading.Thread(target=waiter, args=(index,)) for index in range(waiters)]
    for thread in threads:
        thread.start()
    ready.wait()
    time.sleep(1.0)  # the waiters' calls reach the server and join the line
    beside = heartbeats(run, seconds, agents)
    run.call(holder_client, "POST", "/resources/held/release/", {"session": holder})
    for thread in threads:
        thread.join()
    return {**beside, "waiters": waiters, "waiter_answers": sorted(set(answered))}


def report(figures: dict[str, Any]) -> list[str]:
    cycle, contended = figures["cycles"], figures["contention"]
    alone, beside = figures["heartbeats_alone"], figures["heartbeats_beside_waiters"]
    ratio = beside["per_second"] / alone["per_second"] if alone["per_second"] else 0.0
    return [
        "",
        f"resources ({figures['seconds']:g} s per run, {figures['agents']} agents)",
        f"  acquire+release, one agent   {cycle['per_second']:>8,.1f} cycles/s"
        f"   p50 {cycle['p50_ms']:.1f} ms  p95 {cycle['p95_ms']:.1f} ms",
        f"  contention (capacity 2)      {contended['grants_per_second']:>8,.1f} grants/s"
        f"   wait p50 {contended['wait_p50_ms']:.1f} ms  p95 {contended['wait_p95_ms']:.1f} ms"
        f"  ({contended['refused']} refused)",
        f"  heartbeats alone             {alone['per_second']:>8,.1f} /s"
        f"   p50 {alone['p50_ms']:.1f} ms  p95 {alone['p95_ms']:.1f} ms",
        f"  heartbeats, {beside['waiters']} waiting       {beside['per_second']:>8,.1f} /s"
        f"   p50 {beside['p50_ms']:.1f} ms  p95 {beside['p95_ms']:.1f} ms"
        f"  ({ratio:.2f}× alone)",
        f"  5xx answers                  {figures['server_error_count']:>8}",
        "",
    ]
