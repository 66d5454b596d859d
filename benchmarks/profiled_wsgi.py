"""The app under pyinstrument, for ``manage.py bench --profile DIR``.

gunicorn serves ``benchmarks.profiled_wsgi`` instead of ``projektor.wsgi``. Each
request runs under one profiler shared by the worker's threads, one request at a time:
a request arriving while another is profiled runs unprofiled (a sample, not every
request, but never a request slowed by waiting for the profiler). On SIGUSR2 the
worker writes what it profiled since the last signal to ``DIR/.pending-<pid>.html``
and starts afresh; ``benchmarks.cpu.collect_profiles`` files it under the run's name.
The time is wall time, sampled every half millisecond: a long poll shows its wait.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pyinstrument import Profiler

from benchmarks.cpu import PROFILE_DIR_VARIABLE
from projektor.wsgi import application as projektor_application

INTERVAL_SECONDS = 0.0005
DIRECTORY = Path(os.environ.get(PROFILE_DIR_VARIABLE) or ".")

profiling = threading.Lock()
profiler = Profiler(interval=INTERVAL_SECONDS, async_mode="disabled")


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if not profiling.acquire(blocking=False):
        return projektor_application(environ, start_response)
    try:
        profiler.start()
        try:
            return projektor_application(environ, start_response)
        finally:
            profiler.stop()
    finally:
        profiling.release()


def write_profile(signum: int, frame: object) -> None:
    """SIGUSR2: the profile so far, written atomically, then a fresh one."""
    global profiler
    with profiling:  # the main thread; a profiled request finishes first
        session = profiler.last_session
        html = (
            profiler.output_html()
            if session is not None
            else "<p>No request was profiled on this worker.</p>"
        )
        profiler = Profiler(interval=INTERVAL_SECONDS, async_mode="disabled")
    pending = DIRECTORY / f".pending-{os.getpid()}.html"
    partial = pending.with_suffix(".partial")
    partial.write_text(html)
    partial.replace(pending)


signal.signal(signal.SIGUSR2, write_profile)
