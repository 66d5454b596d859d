"""Fixtures of the fault tests: a key, and the app under gunicorn (the bench's
harness) pointed at the test database."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import server as harness
from coordination.models import ApiKey

WORKERS = 3
# One thread per worker: a worker's database backend is the one its request uses.
THREADS = 1


@pytest.fixture
def raw_key(workspace: Any) -> str:
    return ApiKey.issue(workspace, "fleet")[1]


@pytest.fixture
def gunicorn(tmp_path: Path, transactional_db: None) -> Iterator[harness.Server]:
    """``gunicorn projektor.wsgi`` on a loopback port, serving the test database; what
    a test makes for it is committed (``transactional_db``) so that it sees it."""
    env = harness.environment_on_this_database({"SECRET_KEY": "fault-injection-only"})
    log = tmp_path / "gunicorn.log"
    with harness.gunicorn(env=env, workers=WORKERS, threads=THREADS, log_path=log) as server:
        yield server
