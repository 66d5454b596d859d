"""/metrics under gunicorn's several workers: every worker's requests summed, and the
fleet as the database has it, whichever worker answers the scrape."""

import http.client
import re
import threading

import pytest
from prometheus_client.parser import text_string_to_metric_families

from coordination.models import ApiKey
from tests.conftest import expire
from tests.faults.client import call, wait_until

HEARTBEAT_ROUTE = "api/v1/sessions/<pk>/heartbeat/"


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers={"Connection": "close", **(headers or {})})
        response = connection.getresponse()
        return response.status, response.read().decode(), dict(response.getheaders())
    finally:
        connection.close()


def samples_of(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def heartbeats_counted(samples: dict) -> float:
    labels = (("method", "POST"), ("route", HEARTBEAT_ROUTE), ("status", "200"))
    return samples.get(("projektor_http_requests_total", labels), 0)


def worker_pids_that_counted(metrics_dir) -> set[str]:
    return {
        match.group(1)
        for file in metrics_dir.glob("counter_*.db")
        if (match := re.fullmatch(r"counter_(\d+)\.db", file.name))
    }


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_every_workers_requests_are_summed_and_the_fleet_is_true(
    workspace, make_session, gunicorn, metrics_dir
):
    raw_key = ApiKey.issue(workspace, "fleet")[1]
    sessions = [make_session(f"coder-{n}") for n in range(3)]
    expire(make_session("crashed"))
    sent = 0
    sent_lock = threading.Lock()

    def beat(n: int) -> None:
        nonlocal sent
        outcome = call(gunicorn.port, "POST", f"/sessions/{sessions[n % 3].pk}/heartbeat/", raw_key)
        assert outcome.status == 200, outcome.body
        with sent_lock:
            sent += 1

    # Connections closed after each call land on any worker; send until at least two
    # workers have counted some (each worker writes its own file).
    def burst() -> bool:
        threads = [threading.Thread(target=beat, args=(n,)) for n in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return len(worker_pids_that_counted(metrics_dir)) >= 2

    wait_until(burst, 120, "requests served by two workers")
    status, text, headers = get(gunicorn.port, "/metrics")
    assert status == 200, text
    assert headers["X-Request-ID"]
    samples = samples_of(text)
    assert heartbeats_counted(samples) == sent
    workers_seen = worker_pids_that_counted(metrics_dir)
    assert len(workers_seen) >= 2
    assert set(map(int, workers_seen)) <= set(gunicorn.worker_pids())
    count = (
        "projektor_http_request_duration_seconds_count",
        (("method", "POST"), ("route", HEARTBEAT_ROUTE), ("status", "200")),
    )
    assert samples[count] == sent
    assert samples[("projektor_live_sessions", (("workspace", "acme"),))] == 3
