"""The bench's steps in process: the statement count, which goes through Django's test
client, on a deployment whose ALLOWED_HOSTS lists neither ``localhost`` nor the test
client's ``testserver``."""

import pytest

from benchmarks import load, runs, suite

COUNTED = {"heartbeat", "lease claim", "lease release", "files claim", "files release"}


@pytest.mark.django_db
def test_the_statement_count_works_with_allowed_hosts_of_loopback_only(settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    options = runs.BenchOptions(
        agents=1,
        seconds=suite.QUICK_SECONDS,
        workers=1,
        threads=1,
        selected=("heartbeat",),
        quick=True,
        volumes=load.Volumes().scaled_down(suite.QUICK_DIVISOR),
    )
    bench = suite.Bench(options, progress=lambda message: None)
    bench.bench = load.create_workspace(options.agents)

    bench.count_statements(["heartbeat", "lease", "files"])

    assert bench.report.failures == []
    assert set(bench.report.statements) >= COUNTED
    assert all(count > 0 for count in bench.report.statements.values())
