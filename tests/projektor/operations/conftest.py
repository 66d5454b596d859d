"""The app under gunicorn (the bench's harness, as tests/faults uses it), with the
multiprocess metrics' directory where the test can see it."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import server as harness

WORKERS = 3
THREADS = 2


@pytest.fixture
def metrics_dir(tmp_path: Path) -> Path:
    return tmp_path / "metrics"


@pytest.fixture
def gunicorn(tmp_path: Path, metrics_dir: Path, transactional_db: None) -> Iterator[harness.Server]:
    env = harness.environment_on_this_database(
        {"SECRET_KEY": "metrics-test-only", "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    )
    log = tmp_path / "gunicorn.log"
    with harness.gunicorn(env=env, workers=WORKERS, threads=THREADS, log_path=log) as server:
        yield server
