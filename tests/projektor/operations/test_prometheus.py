"""Debian's real Prometheus scrapes the app under gunicorn with docs/prometheus.yml
and docs/alerts.yml, and its HTTP API answers with the true values.

``make test`` installs the package when missing; without it the test skips locally
and fails when CI=true, like the browser test.
"""

import json
import shutil
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordination.models import ApiKey
from tests.conftest import IN_CI, expire
from tests.faults.client import call, wait_until
from tests.projektor.test_settings import ROOT

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
DOCS = ROOT / "docs"
HEARTBEATS = 25
ALERTS = {
    "ProjektorDown",
    "ProjektorNotReady",
    "ProjektorNoLiveAgents",
    "ProjektorAgentsStalled",
    "ProjektorProjectAtWipCap",
    "ProjektorConflictRateHigh",
    "ProjektorLandingQueueStuck",
    "ProjektorWebhookDeliveriesFailing",
    "ProjektorServerErrors",
    "ProjektorThrottling",
}


def need(binary: str) -> None:
    if not Path(binary).exists():
        if IN_CI:
            pytest.fail(f"CI=true: this test needs {binary} (Debian's prometheus package)")
        pytest.skip(f"needs {binary} (make test installs the prometheus package)")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def api(port: int, path: str, **query: str) -> Any:
    url = f"http://127.0.0.1:{port}{path}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def instant(port: int, expr: str) -> list[dict[str, Any]]:
    answer = api(port, "/api/v1/query", query=expr)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def scalar(port: int, expr: str) -> float | None:
    result = instant(port, expr)
    return float(result[0]["value"][1]) if len(result) == 1 else None


def test_promtool_accepts_the_shipped_config_and_rules():
    need(PROMTOOL)
    for args in (["check", "rules", "alerts.yml"], ["check", "config", "prometheus.yml"]):
        checked = subprocess.run([PROMTOOL, *args], cwd=DOCS, capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_prometheus_scrapes_the_true_fleet_and_requests(
    workspace, make_session, gunicorn, tmp_path
):
    need(PROMETHEUS)
    raw_key = ApiKey.issue(workspace, "fleet")[1]
    live = [make_session(f"coder-{n}") for n in range(2)]
    expire(make_session("crashed"))

    def beat(n: int) -> None:
        outcome = call(gunicorn.port, "POST", f"/sessions/{live[n % 2].pk}/heartbeat/", raw_key)
        assert outcome.status == 200, outcome.body

    threads = [threading.Thread(target=beat, args=(n,)) for n in range(HEARTBEATS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    config = yaml.safe_load((DOCS / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = config["global"]["evaluation_interval"] = "1s"
    config["rule_files"] = [str(DOCS / rules) for rules in config["rule_files"]]
    [job] = config["scrape_configs"]
    job["static_configs"] = [{"targets": [f"127.0.0.1:{gunicorn.port}"]}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    prometheus = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def answers(expr: str, expected: float) -> bool:
        try:
            return scalar(port, expr) == expected
        except OSError:
            return False  # not listening yet

    try:
        route = 'route="api/v1/sessions/<pk>/heartbeat/",status="200"'
        wait_until(lambda: answers('up{job="projektor"}', 1), 90, "Prometheus to scrape")
        assert scalar(port, 'projektor_live_sessions{workspace="acme"}') == 2
        requests = f"sum(projektor_http_requests_total{{{route}}})"
        assert scalar(port, requests) == HEARTBEATS
        histogram = f'sum(projektor_http_request_duration_seconds_bucket{{{route},le="+Inf"}})'
        assert scalar(port, histogram) == HEARTBEATS
        assert scalar(port, f"sum(projektor_http_request_duration_seconds_count{{{route}}})") == (
            HEARTBEATS
        )
        assert scalar(port, 'projektor_ready{check="database"}') == 1

        def rules_evaluated() -> bool:
            groups = api(port, "/api/v1/rules")["data"]["groups"]
            rules = [rule for group in groups for rule in group["rules"]]
            return {rule["name"] for rule in rules} == ALERTS and all(
                rule["health"] == "ok" for rule in rules
            )

        wait_until(rules_evaluated, 60, "every alerting rule to be loaded and evaluated")
        firing = {
            alert["labels"]["alertname"] for alert in api(port, "/api/v1/alerts")["data"]["alerts"]
        }
        assert "ProjektorNoLiveAgents" not in firing and "ProjektorDown" not in firing
        assert scalar(port, 'projektor_stalled_sessions{workspace="acme"}') == 0
    finally:
        prometheus.terminate()
        try:
            prometheus.wait(timeout=30)
        except subprocess.TimeoutExpired:
            prometheus.kill()
            prometheus.wait()
        log.close()
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
