"""Fixtures of the fault tests: a key, and the app under gunicorn (the bench's
harness) pointed at the test database."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from benchmarks import server as harness
from coordination.models import ApiKey
from tests.faults.database import url_of_the_test_database

WORKERS = 3
# One thread per worker: a worker's database backend is the one its request uses.
THREADS = 1
NEVER_REFUSES = "1000000/min"


@pytest.fixture
def raw_key(workspace: Any) -> str:
    return ApiKey.issue(workspace, "fleet")[1]


@pytest.fixture
def gunicorn(tmp_path: Path, transactional_db: None) -> Iterator[harness.Server]:
    """``gunicorn projektor.wsgi`` on a loopback port, serving the test database; what
    a test makes for it is committed (``transactional_db``) so that it sees it."""
    env = harness.app_environment(
        {
            "DATABASE_URL": url_of_the_test_database(),
            "SECRET_KEY": "fault-injection-only",
            "PROJEKTOR_SESSION_TTL_SECONDS": str(settings.PROJEKTOR_SESSION_TTL_SECONDS),
            "PROJEKTOR_THROTTLE_KEY": NEVER_REFUSES,
            "PROJEKTOR_THROTTLE_ANON": NEVER_REFUSES,
        }
    )
    log = tmp_path / "gunicorn.log"
    with harness.gunicorn(env=env, workers=WORKERS, threads=THREADS, log_path=log) as server:
        yield server
