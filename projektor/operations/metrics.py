"""``/metrics`` (docs/api.md, "Operations"): the requests of every app process, and
the fleet, in Prometheus's text format.

Request metrics are counted in the process that served the request. Under gunicorn
(``gunicorn.conf.py``) each worker writes them to its own files in
``PROMETHEUS_MULTIPROC_DIR`` and a scrape, answered by any one worker, sums them
all (prometheus_client's multiprocess mode); without that directory (runserver, the
tests) they live in the process. The fleet is read from the database at scrape time
(``fleet.py``), as is readiness (``projektor_ready``).

Access: a client on a loopback address (the address the proxies saw, with
``PROJEKTOR_NUM_PROXIES``), or ``Authorization: Bearer $PROJEKTOR_METRICS_TOKEN``;
anyone else gets 403 JSON.
"""

import hmac
import ipaddress
import os
from collections.abc import Iterator

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from projektor.operations import health
from projektor.operations.fleet import fleet_metrics

MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
# The text format every Prometheus 2 reads (what generate_latest writes for our names).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

disable_created_metrics()  # no "_created" series beside each counter

REQUESTS = Counter(
    "projektor_http_requests",
    "HTTP requests answered, by method, route (the URL pattern) and status.",
    ["method", "route", "status"],
)
LATENCY = Histogram(
    "projektor_http_request_duration_seconds",
    "Time from the request reaching Django to its answer, by method, route and status.",
    ["method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
THROTTLED = Counter("projektor_throttled", "Requests refused with 429 throttled.")


# Each (method, route, status)'s two series, looked up once per process: ``labels``
# validates and joins the labels on every call. The metrics keep every series they
# were asked for anyway, so this holds no more than they do.
_series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}


def observe_request(method: str, route: str, status: int, duration: float) -> None:
    series = _series.get((method, route, status))
    if series is None:
        labels = (method, route, str(status))
        series = _series[method, route, status] = (
            REQUESTS.labels(*labels),
            LATENCY.labels(*labels),
        )
    series[0].inc()
    series[1].observe(duration)
    if status == 429:
        THROTTLED.inc()


def client_address(request: HttpRequest) -> str:
    """The connection's address, or behind N proxies the one the Nth saw (the same
    rule as the rate limits: the client can write the left of X-Forwarded-For)."""
    remote = request.META.get("REMOTE_ADDR", "")
    proxies = settings.PROJEKTOR_NUM_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    if proxies and forwarded:
        addresses = [address.strip() for address in forwarded.split(",")]
        return addresses[-min(proxies, len(addresses))]
    return remote


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def may_scrape(request: HttpRequest) -> bool:
    token = settings.PROJEKTOR_METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "")
        if hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return True
    return is_loopback(client_address(request))


def readiness_metric(checks: dict[str, str]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "projektor_ready", "1 when a readiness check passes (as /readyz), else 0.", labels=["check"]
    )
    for name, result in checks.items():
        family.add_metric([name], 1 if result == health.OK else 0)
    return family


def exposition() -> bytes:
    """The whole answer: requests (all processes), readiness, then the fleet."""
    if os.environ.get(MULTIPROCESS_DIR):
        requests = CollectorRegistry()
        MultiProcessCollector(requests)
    else:
        requests = REGISTRY
    checks = health.readiness()
    computed: list[Metric] = [readiness_metric(checks)]
    if checks["database"] == checks["migrations"] == health.OK:  # else no tables to read
        computed += fleet_metrics()
    scraped = CollectorRegistry(auto_describe=False)
    scraped.register(_Fixed(computed))
    return generate_latest(requests) + generate_latest(scraped)


class _Fixed(Collector):
    """A collector of metrics already computed for this scrape."""

    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return iter(self.metrics)


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not may_scrape(request):
        return JsonResponse(
            {
                "code": "forbidden",
                "detail": "Metrics are served to loopback addresses, or with "
                "'Authorization: Bearer <PROJEKTOR_METRICS_TOKEN>'.",
            },
            status=403,
        )
    return HttpResponse(exposition(), content_type=CONTENT_TYPE)
