"""A bench waiter over HTTP: one process following the event log by cursor, long-polling.

Standard library only, as the agents (``agent``). Over one kept-alive connection it
reads ``GET /events/?after=<next>&wait=30&limit=1000`` from the cursor the command
gives it, always passing back the ``next`` it got, until it has seen the command's end
marker: a ``message.posted`` to ``end_scope``, written once every writer has finished.
It sends back every id it saw (the command compares them with the table) and, for each
event stamped after the run started, its delivery latency: the time the answer was
read minus the event's ``occurred_at``. The database stamps ``occurred_at`` in the
event write, its transaction's last statement before the commit, on this machine's
clock, the one ``time.time()`` reads here.
"""

from __future__ import annotations

import http.client
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from benchmarks.agent import ERROR_PAUSE_SECONDS, HttpClient, HttpTarget
from benchmarks.workload import BARRIER_TIMEOUT_SECONDS

WAIT_SECONDS = 30  # the longest long poll the API allows
PAGE_LIMIT = 1000  # the largest page: a waiter never falls behind by paging
END_TYPE = "message.posted"
# Past the writers' run, how long a waiter follows on for the end marker.
END_TIMEOUT_SECONDS = 120.0
MAX_ERRORS = 5  # the first few, for the report


@dataclass(frozen=True)
class WaiterPlan:
    index: int
    after: int  # the cursor to start from: the newest event when the run was set up
    seconds: float  # the writers' run; the waiter then follows on to the end marker
    end_scope: str


@dataclass
class WaiterResult:
    """What one waiter sends back: the ids it saw, in the order it saw them, and the
    delivery latencies (seconds) of the events stamped after the run started."""

    index: int
    started: float = 0.0  # time.monotonic()
    finished: float = 0.0
    ids: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    requests: int = 0
    empty: int = 0  # long polls answered with no events: their wait ran out
    outcomes: Counter[str] = field(default_factory=Counter)
    reached_end: bool = False
    setup_error: str | None = None
    errors: list[str] = field(default_factory=list)

    def error(self, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)


def stamp(occurred_at: str) -> float:
    """An event's ``occurred_at`` (ISO 8601, ``Z`` for UTC) as a Unix time."""
    return datetime.fromisoformat(occurred_at).timestamp()


def follow(
    client: HttpClient,
    plan: WaiterPlan,
    result: WaiterResult,
    *,
    cursor: int,
    wait: int,
    since: float | None,
) -> int:
    """One read of the log after ``cursor``; return the cursor to pass next. Latencies
    are kept for the events stamped at or after ``since`` (None: none kept)."""
    path = f"/events/?after={cursor}&wait={wait}&limit={PAGE_LIMIT}"
    try:
        status, data = client.call("GET", path)
    except (OSError, http.client.HTTPException) as error:
        result.outcomes["error"] += 1
        result.error(f"GET /events/: {error!r}")
        time.sleep(ERROR_PAUSE_SECONDS)
        return cursor
    received = time.time()
    result.requests += 1
    result.outcomes[str(status)] += 1
    if status != 200:
        result.error(f"GET /events/: {status} {data[:300]!r}")
        time.sleep(ERROR_PAUSE_SECONDS)
        return cursor
    page = json.loads(data)
    if page.get("missed"):
        result.error(f"GET /events/ after {cursor}: missed (pruned)")
    if wait and not page["events"]:
        result.empty += 1
    for event in page["events"]:
        result.ids.append(int(event["id"]))
        stamped = stamp(event["occurred_at"])
        if since is not None and stamped >= since:
            result.latencies.append(received - stamped)
        if event["type"] == END_TYPE and event["data"].get("scope") == plan.end_scope:
            result.reached_end = True
    return int(page["next"])


def main(plan: WaiterPlan, target: HttpTarget, barrier: Any, results: Any) -> None:
    """Entry point of a spawned waiter process."""
    result = WaiterResult(index=plan.index)
    client = HttpClient(target)
    cursor = plan.after
    try:
        if "django" in sys.modules:
            raise RuntimeError("a bench client process imported Django")
        # Opens the connection and pays for cold caches; what it reads counts as seen.
        cursor = follow(client, plan, result, cursor=cursor, wait=0, since=None)
        barrier.wait(BARRIER_TIMEOUT_SECONDS)
    except Exception as error:  # noqa: BLE001 - reported to the command, which fails the run
        result.setup_error = f"{type(error).__name__}: {error}"
        barrier.abort()
        results.put(result)
        return
    result.started = time.monotonic()
    # Events stamped before this were written before the waiters were all waiting.
    since = time.time()
    give_up = result.started + plan.seconds + END_TIMEOUT_SECONDS
    while not result.reached_end and time.monotonic() < give_up:
        cursor = follow(client, plan, result, cursor=cursor, wait=WAIT_SECONDS, since=since)
    if not result.reached_end:
        result.error(f"the end marker did not come within {END_TIMEOUT_SECONDS:g} s")
    result.finished = time.monotonic()
    client.disconnect()
    results.put(result)
