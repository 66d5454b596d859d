"""The app under gunicorn (the bench's harness, as tests/faults uses it), with the
multiprocess metrics' directory where the test can see it."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from benchmarks import server as harness
from tests.faults.database import url_of_the_test_database

WORKERS = 3
THREADS = 2
NEVER_REFUSES = "1000000/min"


@pytest.fixture
def metrics_dir(tmp_path: Path) -> Path:
    return tmp_path / "metrics"


@pytest.fixture
def gunicorn(tmp_path: Path, metrics_dir: Path, transactional_db: None) -> Iterator[harness.Server]:
    env = harness.app_environment(
        {
            "DATABASE_URL": url_of_the_test_database(),
            "SECRET_KEY": "metrics-test-only",
            "PROJEKTOR_SESSION_TTL_SECONDS": str(settings.PROJEKTOR_SESSION_TTL_SECONDS),
            "PROJEKTOR_THROTTLE_KEY": NEVER_REFUSES,
            "PROJEKTOR_THROTTLE_ANON": NEVER_REFUSES,
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        }
    )
    log = tmp_path / "gunicorn.log"
    with harness.gunicorn(env=env, workers=WORKERS, threads=THREADS, log_path=log) as server:
        yield server
