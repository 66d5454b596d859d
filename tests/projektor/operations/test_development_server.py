"""``make run``'s server lives for days: Django's development server, started as the
Makefile starts it, answers a few hundred requests from many threads (a thread of
its own each) with its open files and memory flat. Before, every request's thread
kept its database connection (two open files on SQLite, a socket on PostgreSQL)
and its rate-limit counters' file: about 0.7 MB and two descriptors more per
request, until the process ran out of descriptors within the hour."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from benchmarks import server as harness
from coordination.models import ApiKey, Workspace
from tests.demo.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]
WARM_UP_REQUESTS = 100  # imports, caches and the allocator's pools settle first
REQUESTS = 400
THREADS = 16
# Growth allowed over REQUESTS: a leak adds two descriptors and ~0.7 MB per request.
MORE_FILES_AT_MOST = 20
MORE_MEMORY_AT_MOST_KB = 40 * 1024


def make_run_environment() -> dict[str, str]:
    """The Makefile's ``DEMO_ENV`` and the request log ``make run`` turns off."""
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r"^DEMO_ENV := (.*)$", makefile, re.MULTILINE)
    assert match, "the Makefile names make run's environment DEMO_ENV"
    pairs = dict(assignment.split("=", 1) for assignment in shlex.split(match[1]))
    return {**pairs, "PROJEKTOR_LOG_REQUESTS": "false"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((harness.HOST, 0))
        return int(probe.getsockname()[1])


def open_files(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def resident_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)[1])  # type: ignore[index]


def test_make_runs_server_keeps_its_open_files_and_memory_flat(tmp_path: Path) -> None:
    raw = ApiKey.issue(Workspace.objects.create(slug="flat", name="Flat"), "flat")[1]
    env = harness.environment_on_this_database({"SECRET_KEY": None, **make_run_environment()})
    env.pop("PROJEKTOR_CONN_MAX_AGE", None)  # the default, as make run has it
    port = free_port()
    log = (tmp_path / "runserver.log").open("wb")
    reloader = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"{harness.HOST}:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://{harness.HOST}:{port}/api/v1/issues/"

    def get(_: int) -> int:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {raw}"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            return int(answer.status)

    try:
        # make run's autoreloader serves from a child process of its own.
        wait_until(lambda: harness.children(reloader.pid), "the development server's child")
        wait_until(lambda: harness.answers(harness.HOST, port), "the development server")
        (server,) = harness.children(reloader.pid)
        with ThreadPoolExecutor(THREADS) as pool:
            assert set(pool.map(get, range(WARM_UP_REQUESTS))) == {200}
            files, memory = open_files(server), resident_kb(server)
            assert set(pool.map(get, range(REQUESTS))) == {200}
        more_files = open_files(server) - files
        more_memory = resident_kb(server) - memory
    finally:
        os.killpg(reloader.pid, signal.SIGTERM)  # the reloader and its child
        reloader.wait(30)
        log.close()
    assert more_files <= MORE_FILES_AT_MOST, f"{more_files} more open files"
    assert more_memory <= MORE_MEMORY_AT_MOST_KB, f"{more_memory} kB more memory"
