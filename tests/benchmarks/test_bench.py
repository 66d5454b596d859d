"""``manage.py bench`` end to end, as a user runs it: migrate a scratch database, run
the quick bench in a subprocess (gunicorn, client processes, direct SQL), read its
JSON. On the SQLite pass the scratch database is a temporary file; on the PostgreSQL
pass it is a database of its own on the same server, created and dropped here. The
Django test database is not used."""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
SCENARIOS = {
    "heartbeat",
    "lease",
    "files",
    "contended",
    "directories",
    "live",
    "ready",
    "files-1",
    "events",
}
NO_CEILING = {"events"}  # long polls have no direct run
# Generous: the bench itself takes about a minute; this only stops a hang.
TIMEOUT_SECONDS = 600


def on_postgresql() -> bool:
    return str(settings.DATABASES["default"]["ENGINE"]).endswith("postgresql")


@pytest.fixture
def scratch_database(tmp_path: Path) -> Iterator[str]:
    """A DATABASE_URL for an empty database of the configured kind."""
    if not on_postgresql():
        yield f"sqlite:///{tmp_path / 'bench.sqlite3'}"
        return
    url = urlsplit(os.environ["DATABASE_URL"])
    name = f"projektor_bench_test_{os.getpid()}"  # two suites at once do not collide
    admin = url._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def manage(*args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SECRET_KEY": os.environ.get("SECRET_KEY") or "test-only-secret-key",
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )


def failed(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"


def server_errors(figures: dict[str, Any]) -> list[str]:
    return [label for label in figures["statuses"] if label.startswith(("5", "error"))]


def test_quick_bench_runs_every_scenario_end_to_end(scratch_database: str, tmp_path: Path):
    migrated = manage("migrate", "-v0", database_url=scratch_database)
    assert migrated.returncode == 0, failed(migrated)
    figures_file = tmp_path / "bench.json"

    # One second per run: every scenario still runs end to end, on both sides.
    result = manage(
        "bench",
        "--quick",
        "--seconds",
        "1",
        "--json",
        str(figures_file),
        database_url=scratch_database,
    )

    assert result.returncode == 0, failed(result)
    assert "API÷direct" in result.stdout  # the table was printed
    figures = json.loads(figures_file.read_text())
    assert figures["failures"] == []
    assert figures["config"]["database"] == ("postgresql" if on_postgresql() else "sqlite")
    assert figures["config"]["quick"] is True
    assert set(figures["scenarios"]) == SCENARIOS
    for name, scenario in figures["scenarios"].items():
        assert scenario["api"]["ops"] > 0, name
        assert scenario["statements_per_op"] > 0, name
        assert server_errors(scenario["api"]) == [], name
        assert "429" not in scenario["api"]["statuses"], name
        if name in NO_CEILING:
            assert scenario["direct"] is None, name
            continue
        assert scenario["direct"]["ops"] > 0, name
        assert server_errors(scenario["direct"]) == [], name
    assert figures["scenarios"]["files-1"]["agents"] == 1
    assert figures["scenarios"]["contended"]["api"]["requests"]["claim"]["statuses"]["201"] > 0
    assert figures["scenarios"]["directories"]["api"]["requests"]["claim"]["statuses"]["201"] > 0
    assert set(figures["statements"]) >= {
        "heartbeat",
        "lease claim",
        "lease release",
        "files claim",
        "files release",
        "directory claim",
        "directory conflict",
        "directory release",
        "live list",
        "ready list",
    }
    for step in ("history", "active", "active directories", "directories, active"):
        assert figures["growth"][step]["api"]["ops"] > 0, step
        assert figures["growth"][step]["ratio_to_empty"] > 0, step
        assert figures["growth"][step]["direct"]["ops"] > 0, step  # its ceiling, beside it
        assert figures["growth"][step]["api_over_direct"] > 0, step
    for name in ("heartbeat", "files"):
        assert figures["throttle"][name]["off_ops_per_s"] > 0, name
        assert figures["throttle"][name]["on_over_off"] > 0, name
        assert figures["throttle"][name]["off_over_direct"] > 0, name
    assert figures["events"]["seen_all"] is True


def test_quick_events_scenario_delivers_every_event_to_every_waiter(
    scratch_database: str, tmp_path: Path
):
    """``--scenarios events`` alone, on two gunicorn workers (a write through one wakes
    a waiter on the other): the writers' throughput, the delivery latency and the
    seen-all check are reported. What the figures are is not checked, only that they
    are there."""
    migrated = manage("migrate", "-v0", database_url=scratch_database)
    assert migrated.returncode == 0, failed(migrated)
    figures_file = tmp_path / "bench.json"

    result = manage(
        "bench",
        "--quick",
        "--scenarios",
        "events",
        "--workers",
        "2",
        "--json",
        str(figures_file),
        database_url=scratch_database,
    )

    assert result.returncode == 0, failed(result)
    assert "Event delivery (events)" in result.stdout
    assert "seen-all     OK" in result.stdout
    assert "same machine, same clock" in result.stdout
    figures = json.loads(figures_file.read_text())
    assert figures["failures"] == []
    assert set(figures["scenarios"]) == {"events"}
    row = figures["scenarios"]["events"]
    assert row["direct"] is None and row["api_over_direct"] is None
    assert row["api"]["requests"]["claim"]["statuses"] == {"201": row["api"]["ops"]}
    events = figures["events"]
    assert events["writers"] == events["waiters"] == 2
    assert events["wait_seconds"] == 30
    assert events["writer_cycles_per_s"] > 0
    latency = events["delivery_latency_ms"]
    assert latency["count"] > 0
    assert set(latency) >= {"p50", "p95", "p99"}
    assert latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
    # Every waiter saw every event of the table after its cursor: a claim and a
    # release per cycle at least, and the end marker.
    assert events["seen_all"] is True
    assert events["problems"] == []
    assert events["table_events"] >= 2 * row["api"]["ops"] + 1
    assert events["seen_per_waiter"] == {"0": events["table_events"], "1": events["table_events"]}
    assert events["statuses"] == {"200": events["polls"]}


def test_quick_bench_prints_the_server_cpu_per_request_and_writes_profiles(
    scratch_database: str, tmp_path: Path
):
    """The server's CPU per request beside each API run, the reference calls (one
    worker, one thread) with the server's floor and in-process (no HTTP server), and
    with ``--profile`` a pyinstrument profile of each worker under each run. The
    figures' values are not checked, only that they are there."""
    migrated = manage("migrate", "-v0", database_url=scratch_database)
    assert migrated.returncode == 0, failed(migrated)
    figures_file, profiles = tmp_path / "bench.json", tmp_path / "profiles"

    result = manage(
        "bench",
        "--quick",
        "--scenarios",
        "heartbeat,reference",
        "--seconds",
        "1",
        "--workers",
        "1",
        "--profile",
        str(profiles),
        "--json",
        str(figures_file),
        database_url=scratch_database,
    )

    assert result.returncode == 0, failed(result)
    header = next(line for line in result.stdout.splitlines() if line.startswith("scenario"))
    assert "CPU ms/req" in header
    assert "Reference calls (gunicorn 1 worker × 1 thread" in result.stdout
    for call in ("healthz", "heartbeat", "claim 10 + release"):
        line = next(line for line in result.stdout.splitlines() if line.startswith(f"  {call} "))
        assert "target ≤ " in line and line.endswith(("met", "NOT met")), line
    figures = json.loads(figures_file.read_text())
    assert figures["failures"] == []
    assert "server_cpu_ms_per_request" in figures["scenarios"]["heartbeat"]["api"]
    assert set(figures["reference_calls"]) == {"healthz", "heartbeat", "claim 10 + release"}
    floor_line = next(line for line in result.stdout.splitlines() if "the server's floor" in line)
    assert "gunicorn serving /healthz's bytes" in floor_line
    floor = figures["reference_floor"]
    assert floor["calls"] == figures["reference_calls"]["healthz"]["calls"]
    assert floor["server_cpu_ms"] > 0 and floor["wall_ms"] > 0
    in_process = figures["reference_in_process"]
    assert set(in_process) == set(figures["reference_calls"])
    assert "The same calls in-process (the app called directly, no HTTP server" in result.stdout
    for name, call in in_process.items():
        lines = [
            line
            for line in result.stdout.splitlines()
            if line.startswith(f"  {name} ") and "back to back" in line
        ]
        assert len(lines) == 1 and "paused" in lines[0], lines
        assert call["calls"] == figures["reference_calls"][name]["calls"]
        assert call["back_to_back_cpu_ms"] > 0 and call["paused_cpu_ms"] > 0
        assert call["pause_ms"] == 1
    targets = {"healthz": 0.4, "heartbeat": 1.1, "claim 10 + release": 4.0}
    factor = 1.3 if on_postgresql() else 1.0
    for name, call in figures["reference_calls"].items():
        assert set(call) == {"calls", "server_cpu_ms", "wall_ms", "target_ms", "met"}
        assert call["target_ms"] == round(targets[name] * factor, 2)
        assert call["met"] == (call["server_cpu_ms"] <= call["target_ms"])
    written = sorted(path.name.split(".worker-")[0] for path in profiles.glob("*.html"))
    assert written == [
        "heartbeat",
        "reference-claim-10-release",
        "reference-healthz",
        "reference-heartbeat",
    ]
