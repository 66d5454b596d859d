"""The server's own CPU: what gunicorn's processes spent, read from ``/proc``.

``server_cpu_seconds`` sums user and system time of the master and its live workers;
the bench reads it before and after a run and divides by the requests sent. Worker
time a killed worker took with it is lost (the bench kills none). Linux only: on a
system without ``/proc`` the figure is None, and the report says "—".

``--profile DIR``: the server runs ``benchmarks.profiled_wsgi`` (pyinstrument around
each request); after each run the bench asks every worker for its profile (SIGUSR2)
and files it under the run's name.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from benchmarks.server import PROC, Server

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# /proc/<pid>/stat after the ")" closing the command name: utime and stime (fields
# 14 and 15 of proc(5)) are the 12th and 13th.
UTIME, STIME = 11, 12
PROFILE_TIMEOUT_SECONDS = 60.0
PROFILE_DIR_VARIABLE = "PROJEKTOR_BENCH_PROFILE_DIR"
PROFILED_APP = "benchmarks.profiled_wsgi"


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU of one live process; 0 when it is gone."""
    try:
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[UTIME]) + int(fields[STIME])) / CLOCK_TICKS


def server_cpu_seconds(server: Server) -> float | None:
    """All of gunicorn's CPU so far: the master's and its live workers'."""
    if not PROC.is_dir():
        return None
    return sum(process_cpu_seconds(pid) for pid in [server.process.pid, *server.worker_pids()])


def per_request_ms(before: float | None, after: float | None, requests: int) -> float | None:
    if before is None or after is None or requests <= 0:
        return None
    return (after - before) * 1000 / requests


def profile_file_name(run: str, pid: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", run.lower()).strip("-")
    return f"{slug}.worker-{pid}.html"


def collect_profiles(server: Server, directory: Path, run: str) -> list[Path]:
    """Ask each worker for the profile of the requests since its last one and file it
    as ``<run>.worker-<pid>.html``; waits for each (the worker writes it between two
    requests)."""
    written = []
    for pid in server.worker_pids():
        pending = directory / f".pending-{pid}.html"  # the name profiled_wsgi writes
        pending.unlink(missing_ok=True)
        os.kill(pid, signal.SIGUSR2)
        deadline = time.monotonic() + PROFILE_TIMEOUT_SECONDS
        while not pending.exists():
            if time.monotonic() > deadline or not server.alive():
                break
            time.sleep(0.02)
        if pending.exists():
            target = directory / profile_file_name(run, pid)
            pending.replace(target)
            written.append(target)
    return written
