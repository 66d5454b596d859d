"""gunicorn's settings for Projektor: `make serve` runs `gunicorn projektor.wsgi` with
them (gunicorn reads ./gunicorn.conf.py by itself; command-line flags win).

The bench's best (docs/speed.md, "The fleet bench"): gthread workers, 2 × cores + 1 of them, 4
threads each, connections kept alive for the agents. Before the workers start, the
deployment checks run (static files collected: ``projektor.operations.checks``), and
request metrics go to one directory that every worker writes and any worker's
``/metrics`` sums (prometheus_client's multiprocess mode).
"""

import multiprocessing
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

bind = os.environ.get("PROJEKTOR_BIND", "127.0.0.1:8000")
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY", 2 * multiprocessing.cpu_count() + 1))
# PROJEKTOR_THREADS requests of a worker run at once; a request that waits (a long
# poll, a call in a resource's line) sleeps in one of PROJEKTOR_WAITING_THREADS more
# and gives its place up while it sleeps (projektor/operations/active.py), so up to
# that many waiters leave the working threads to heartbeats (more take them: raise it).
active_threads = int(os.environ.get("PROJEKTOR_THREADS", "4"))
threads = active_threads + int(os.environ.get("PROJEKTOR_WAITING_THREADS", "32"))
os.environ.setdefault("PROJEKTOR_ACTIVE_REQUESTS", str(active_threads))
keepalive = 30  # longer than an agent's pause between calls
graceful_timeout = 20
accesslog = None  # the app writes one line per request itself (projektor.operations.requests)
errorlog = "-"
# Each worker touches a file every time it wakes, to show the master it is alive: on a
# disk's filesystem py-spy found 6 % of a heartbeat's worker samples there, and a busy
# disk can block it; gunicorn's documentation advises a directory in memory. Where
# there is no /dev/shm, gunicorn's default.
if os.path.isdir("/dev/shm"):
    worker_tmp_dir = "/dev/shm"

# Must be in the environment before a worker imports prometheus_client. A directory of
# our own unless one is given; either way emptied at start (the files of a previous
# run's workers would be counted again).
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
OWNED = "PROJEKTOR_METRICS_DIR_OWNED"
if not os.environ.get(MULTIPROCESS_DIR):
    os.environ[MULTIPROCESS_DIR] = tempfile.mkdtemp(prefix="projektor-metrics-")
    os.environ[OWNED] = "1"


def on_starting(server: Any) -> None:
    directory = Path(os.environ[MULTIPROCESS_DIR])
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()
    refuse_a_broken_deployment(server)


def refuse_a_broken_deployment(server: Any) -> None:
    """The deployment checks tagged ``projektor`` (its system checks): an error
    stops gunicorn before any worker serves a page without its static files."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "projektor.settings")
    import django
    from django.core import checks

    django.setup()
    errors = [
        message
        for message in checks.run_checks(tags=["projektor"], include_deployment_checks=True)
        if message.is_serious()
    ]
    for error in errors:
        server.log.error("%s: %s %s", error.id, error.msg, error.hint or "")
    if errors:
        on_exit(server)
        sys.exit(1)


def child_exit(server: Any, worker: Any) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server: Any) -> None:
    if os.environ.get(OWNED) == "1":
        shutil.rmtree(os.environ[MULTIPROCESS_DIR], ignore_errors=True)
