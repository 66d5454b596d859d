"""The ``events`` run, in the command's process: writers claiming and releasing files
(the ``files`` op) while as many waiters follow the event log by long poll
(``waiter``), then the check that every waiter saw every event.

The waiters start from the newest event of the bench workspace. Once every writer has
finished (its session ended), the command posts the end marker, a message to the bench
project: its event is the last the waiters need, and the table's events after their
cursor up to it are what each of them must have seen, in id order, none twice.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from django.db import connection

from benchmarks import agent, waiter
from benchmarks.fleet import (
    RESULT_GRACE_SECONDS,
    Job,
    Latency,
    RunFigures,
    collect,
    started,
    summarise,
)
from benchmarks.load import BenchWorkspace
from benchmarks.workload import AgentPlan
from coordination.models import Event, EventType
from coordination.services import messages

# Whoever reads the report must know what the latency spans and how it was taken.
LATENCY_SOURCE = (
    "the waiter's receive time minus the event's occurred_at, which the database stamps"
    " in the event write, its transaction's last statement before the commit"
    " (PostgreSQL: statement_timestamp(), taken before that statement waits for the"
    " workspace's event-log lock; SQLite: to the millisecond)"
)
SAME_CLOCK = "the database and the waiters run on the same machine, same clock"
OTHER_CLOCK = (
    "WARNING: the database runs on another host, whose clock the figures include"
    " (its offset from this machine's)"
)
LOCAL_HOSTS = ("", "localhost", "127.0.0.1", "::1")


def clock() -> str:
    """Whether the database's clock is the waiters' (SQLite, or PostgreSQL on this host)."""
    if connection.vendor == "sqlite":
        return SAME_CLOCK
    host = str(connection.settings_dict.get("HOST") or "")
    return SAME_CLOCK if host in LOCAL_HOSTS or host.startswith("/") else OTHER_CLOCK


@dataclass
class DeliveryFigures:
    """The writers' run and what the waiters saw of it."""

    writers: RunFigures
    waiters: int
    wait_seconds: int
    page_limit: int
    clock: str  # SAME_CLOCK or OTHER_CLOCK
    latency: Latency = field(default_factory=lambda: Latency.of([]))
    table_events: int = 0  # after the waiters' cursor, through the end marker
    seen: dict[int, int] = field(default_factory=dict)  # waiter index: events it saw
    problems: list[str] = field(default_factory=list)  # a waiter's ids that differ
    requests: int = 0
    empty_answers: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    @property
    def seen_all(self) -> bool:
        """Every waiter reported, and each saw exactly the table's events, in order."""
        return len(self.seen) == self.waiters and not self.problems and self.table_events > 0


def newest_event(bench: BenchWorkspace) -> int:
    newest = (
        Event.objects.filter(workspace_id=bench.pk).order_by("-id").values_list("id", flat=True)
    ).first()
    return newest or 0


def end_scope(bench: BenchWorkspace) -> str:
    return f"project:{bench.project.key}"


def post_end_marker(bench: BenchWorkspace) -> int:
    """Post the marker the waiters stop at; return its event's id."""
    message = messages.post_message(
        workspace=bench.workspace, scope=end_scope(bench), body="The events run is over."
    )
    return (
        Event.objects.filter(
            workspace_id=bench.pk, type=EventType.MESSAGE_POSTED, data__message=message.pk
        )
        .values_list("id", flat=True)
        .get()
    )


def compare(table: list[int], seen: list[int]) -> str | None:
    """None when ``seen`` is ``table``; else what differs."""
    if seen == table:
        return None
    counts = Counter(seen)
    expected = set(table)
    missing = len(expected - counts.keys())
    twice = sum(1 for n in counts.values() if n > 1)
    extra = len(counts.keys() - expected)
    disorder = ", out of id order" if seen != sorted(seen) else ""
    return (
        f"saw {len(seen):,} of {len(table):,} events: {missing:,} missing,"
        f" {twice:,} seen more than once, {extra:,} not in the table{disorder}"
    )


def summarise_delivery(
    writers: RunFigures, results: list[waiter.WaiterResult], table: list[int], *, waiters: int
) -> DeliveryFigures:
    figures = DeliveryFigures(
        writers=writers,
        waiters=waiters,
        wait_seconds=waiter.WAIT_SECONDS,
        page_limit=waiter.PAGE_LIMIT,
        clock=clock(),
        table_events=len(table),
    )
    if len(results) < waiters:
        figures.failures.append(f"{waiters - len(results)} of {waiters} waiters reported nothing")
    for result in sorted(results, key=lambda r: r.index):
        if result.setup_error:
            figures.failures.append(f"waiter {result.index} failed to start: {result.setup_error}")
            continue
        figures.failures.extend(f"waiter {result.index}: {error}" for error in result.errors)
        figures.seen[result.index] = len(result.ids)
        figures.requests += result.requests
        figures.empty_answers += result.empty
        figures.statuses.update(result.outcomes)
        problem = compare(table, result.ids)
        if problem:
            figures.problems.append(f"waiter {result.index}: {problem}")
    figures.latency = Latency.of([value for r in results for value in r.latencies])
    unexpected = {label: n for label, n in figures.statuses.items() if label != "200"}
    if unexpected:
        shown = ", ".join(f"{label} ×{n}" for label, n in sorted(unexpected.items()))
        figures.failures.append(f"GET /events/: {shown}")
    if not table:
        figures.failures.append("no event was written")
    return figures


def run(
    bench: BenchWorkspace, target: agent.HttpTarget, writers: list[AgentPlan], *, waiters: int
) -> DeliveryFigures:
    """The writers' ``files`` ops and ``waiters`` waiters, started together."""
    after = newest_event(bench)
    seconds = max(plan.seconds for plan in writers)
    plans = [
        waiter.WaiterPlan(index=index, after=after, seconds=seconds, end_scope=end_scope(bench))
        for index in range(waiters)
    ]
    jobs = [
        Job(agent.main, target, writers, label="events-writer"),
        Job(waiter.main, target, plans, label="events-waiter"),
    ]
    with started(jobs, mode="api") as (writing, waiting):
        written = collect(writing, deadline=time.monotonic() + seconds + RESULT_GRACE_SECONDS)
        # Every writer has ended its session (or is gone): the marker is the last event.
        end = post_end_marker(bench)
        seen = collect(
            waiting, deadline=time.monotonic() + waiter.END_TIMEOUT_SECONDS + RESULT_GRACE_SECONDS
        )
    table = list(
        Event.objects.filter(workspace_id=bench.pk, id__gt=after, id__lte=end)
        .order_by("id")
        .values_list("id", flat=True)
    )
    return summarise_delivery(
        summarise("files", "api", written, agents=len(writers)), seen, table, waiters=waiters
    )
