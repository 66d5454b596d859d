"""Statements per request, counted in the command's process.

One request of each kind goes through the whole stack (middleware, DRF, the
throttle, the services) with ``django.test.Client`` under ``CaptureQueriesContext``,
after one unmeasured request of the same kind so that nothing is counted that only a
first request does. What is counted is what Django's cursors execute, BEGIN and
COMMIT included; the per-request health check of a persistent connection
(``CONN_HEALTH_CHECKS``) bypasses them and is not. The rate limits are those of the
bench's main server (counted, never refusing): on PostgreSQL's database cache that
is one upsert per request (SQLite's counters are in a file of their own, whose
statements Django's cursors do not see), and the first request of a window also
deletes the ended windows' counters, so each kind is counted twice and the smaller
count kept.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from benchmarks.load import BenchWorkspace, counter_paths

API = "/api/v1"
COUNTS = 2


class Counter:
    """The statement counter's own agent, session and issues in the bench workspace."""

    def __init__(self, bench: BenchWorkspace) -> None:
        self.client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {bench.raw_key}")
        self.lease_issue, self.files_issue, self.rival_issue = bench.counter_issues
        self.paths = list(counter_paths())
        self.session = 0
        self.failures: list[str] = []

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.client.post(API + path, json.dumps(body or {}), content_type="application/json")

    def get(self, path: str) -> Any:
        return self.client.get(API + path)

    def start(self) -> None:
        response = self.post("/sessions/", {"agent": "bench-statement-counter"})
        self.session = response.json()["id"]

    def stop(self) -> None:
        self.post(f"/sessions/{self.session}/end/")

    def count(self, kind: str, request: Callable[[], Any], expected: int) -> int:
        """Statements of one ``request`` that must answer ``expected``."""
        with CaptureQueriesContext(connection) as captured:
            response = request()
        if response.status_code != expected:
            self.failures.append(f"{kind}: {response.status_code} {response.content[:200]!r}")
        return len(captured.captured_queries)

    def fewest(self, cycle: dict[str, tuple[Callable[[], Any], int]]) -> dict[str, int]:
        """Run ``cycle`` (kind: (request, expected status), in order) once unmeasured,
        then ``COUNTS`` times measured; the fewest statements of each kind."""
        for request, _ in cycle.values():
            request()
        counts: dict[str, list[int]] = {kind: [] for kind in cycle}
        for _ in range(COUNTS):
            for kind, (request, expected) in cycle.items():
                counts[kind].append(self.count(kind, request, expected))
        return {kind: min(values) for kind, values in counts.items()}

    # --- the kinds ---------------------------------------------------------------------

    def heartbeat(self) -> dict[str, int]:
        beat = partial(self.post, f"/sessions/{self.session}/heartbeat/")
        return self.fewest({"heartbeat": (beat, 200)})

    def lease(self) -> dict[str, int]:
        body = {"session": self.session}
        return self.fewest(
            {
                "lease claim": (
                    partial(self.post, f"/issues/{self.lease_issue}/claim/", body),
                    201,
                ),
                "lease release": (
                    partial(self.post, f"/issues/{self.lease_issue}/release/", body),
                    200,
                ),
            }
        )

    def files(self) -> dict[str, int]:
        mine = {"issue": self.files_issue, "session": self.session}
        rival = {"issue": self.rival_issue, "session": self.session, "paths": self.paths}
        return self.fewest(
            {
                "files claim": (
                    partial(self.post, "/file-claims/", {**mine, "paths": self.paths}),
                    201,
                ),
                # Another issue claiming the same paths while they are held: refused.
                "files conflict": (partial(self.post, "/file-claims/", rival), 409),
                "files release": (partial(self.post, "/file-claims/release/", mine), 200),
            }
        )

    def directories(self) -> dict[str, int]:
        """A directory claim, a file under it refused to a rival, the release."""
        mine = {"issue": self.files_issue, "session": self.session}
        tree = {**mine, "paths": ["src/counter-tree/"]}
        rival = {
            "issue": self.rival_issue,
            "session": self.session,
            "paths": ["src/counter-tree/deep/module0.py"],
        }
        return self.fewest(
            {
                "directory claim": (partial(self.post, "/file-claims/", tree), 201),
                "directory conflict": (partial(self.post, "/file-claims/", rival), 409),
                "directory release": (partial(self.post, "/file-claims/release/", mine), 200),
            }
        )

    def live(self) -> dict[str, int]:
        return self.fewest({"live list": (partial(self.get, "/sessions/?live=true"), 200)})

    def ready(self) -> dict[str, int]:
        return self.fewest({"ready list": (partial(self.get, "/issues/ready/"), 200)})


@contextmanager
def quiet() -> Iterator[None]:
    """The counter's requests are not the bench's figures: no line for each (the
    request log's), no warning for its refusals, which are on purpose (Django logs
    every 4xx), nor for the static files the bench never serves."""
    loggers = [logging.getLogger(name) for name in ("projektor.request", "django.request")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="No directory at")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def count_statements(
    bench: BenchWorkspace, groups: list[str], *, throttle_rate: str
) -> tuple[dict[str, int], list[str]]:
    """Statements per request for each kind of the ``groups`` (``heartbeat``,
    ``lease``, ``files``, ``directories``, ``live``, ``ready``), and any unexpected
    answers, with the
    rate limits the bench's server runs with (``throttle_rate`` for both scopes)."""
    counter = Counter(bench)
    counts: dict[str, int] = {}
    rates = {"key": throttle_rate, "anon": throttle_rate}
    throttled = override_settings(
        PROJEKTOR_THROTTLE_KEY=throttle_rate,
        PROJEKTOR_THROTTLE_ANON=throttle_rate,
        REST_FRAMEWORK={**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates},
    )
    with quiet(), throttled:
        counter.start()
        try:
            for group in groups:
                counts.update(getattr(counter, group)())
        finally:
            counter.stop()
    return counts, counter.failures


def statements_per_op(
    scenario: str, counts: dict[str, int], outcomes: dict[str, Any]
) -> float | None:
    """Statements of one op of ``scenario``, from the per-request counts; for
    ``contended``, weighted by how its claims actually went."""
    if scenario == "heartbeat":
        return counts.get("heartbeat")
    if scenario == "lease":
        return sum_of(counts, "lease claim", "lease release")
    if scenario in ("files", "files-1"):
        return sum_of(counts, "files claim", "files release")
    if scenario in ("contended", "directories"):
        won = outcomes.get("claim", {}).get("201", 0)
        lost = outcomes.get("claim", {}).get("conflict", 0)
        kind = "files" if scenario == "contended" else "directory"
        pair = sum_of(counts, f"{kind} claim", f"{kind} release")
        refused = counts.get(f"{kind} conflict")
        if pair is None or refused is None or not won + lost:
            return None
        return (won * pair + lost * refused) / (won + lost)
    if scenario in ("live", "ready"):
        return counts.get(f"{scenario} list")
    return None


def sum_of(counts: dict[str, int], *kinds: str) -> int | None:
    if any(kind not in counts for kind in kinds):
        return None
    return sum(counts[kind] for kind in kinds)
