"""Run a scenario with a fleet of client processes and sum up what they report.

The clients are separate processes (the ``spawn`` start method: fresh interpreters
that import only the client modules, never the command's Django), each with its
own connection. They start together on a barrier the command takes part in, run
until their deadline and send back raw latencies, which are summed up here. A run
may start several groups of processes at once (``started``: the ``events`` writers and
waiters), each sending its figures on its own queue.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.workload import (
    BARRIER_TIMEOUT_SECONDS,
    EXPECTED,
    AgentPlan,
    AgentResult,
)

# How long past its deadline the command waits for an agent's figures (a request in
# flight at the deadline may still be waiting on a lock).
RESULT_GRACE_SECONDS = 120.0


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest rank (every bench's percentiles); 0 for no values."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, round(fraction * (len(sorted_values) - 1)))
    return sorted_values[index]


@dataclass(frozen=True)
class Latency:
    """Percentiles in milliseconds."""

    p50: float
    p95: float
    p99: float
    max: float
    count: int

    @classmethod
    def of(cls, seconds: list[float]) -> Latency:
        ms = sorted(value * 1000 for value in seconds)
        return cls(
            p50=percentile(ms, 0.50),
            p95=percentile(ms, 0.95),
            p99=percentile(ms, 0.99),
            max=ms[-1] if ms else 0.0,
            count=len(ms),
        )


@dataclass
class RunFigures:
    """One run (a scenario, over HTTP or direct) summed over its agents."""

    scenario: str
    mode: str  # "api" or "direct"
    agents: int
    seconds: float = 0.0  # from the first agent's start to the last one's finish
    ops: int = 0
    op_latency: Latency = field(default_factory=lambda: Latency.of([]))
    requests: dict[str, Latency] = field(default_factory=dict)
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    statements: dict[str, int] = field(default_factory=dict)  # direct: sent, per kind
    reconnects: int = 0
    failures: list[str] = field(default_factory=list)
    # The server's CPU (all gunicorn's processes) per request sent: api runs only.
    server_cpu_ms: float | None = None

    @property
    def ops_per_second(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    @property
    def statuses(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for counts in self.outcomes.values():
            total.update(counts)
        return total

    @property
    def requests_sent(self) -> int:
        return sum(latency.count for latency in self.requests.values())

    @property
    def statements_per_op(self) -> float:
        return sum(self.statements.values()) / self.ops if self.ops else 0.0

    def statements_per_request(self, kind: str) -> float | None:
        requests = self.requests.get(kind)
        if requests is None or not requests.count:
            return None
        return self.statements.get(kind, 0) / requests.count


def summarise(scenario: str, mode: str, results: list[AgentResult], agents: int) -> RunFigures:
    figures = RunFigures(scenario=scenario, mode=mode, agents=agents)
    for result in results:
        if result.setup_error:
            figures.failures.append(f"agent {result.index} failed to start: {result.setup_error}")
        figures.failures.extend(f"agent {result.index}: {error}" for error in result.errors)
    timed = [result for result in results if not result.setup_error]
    if len(timed) < agents:
        figures.failures.append(f"{agents - len(timed)} of {agents} agents reported no figures")
    if not timed:
        return figures
    figures.seconds = max(r.finished for r in timed) - min(r.started for r in timed)
    figures.ops = sum(r.ops for r in timed)
    figures.op_latency = Latency.of([value for r in timed for value in r.op_latencies])
    for r in timed:
        for kind, sent in r.statements.items():
            figures.statements[kind] = figures.statements.get(kind, 0) + sent
    figures.reconnects = sum(r.reconnects for r in timed)
    for kind in EXPECTED[scenario]:
        figures.requests[kind] = Latency.of([v for r in timed for v in r.latencies.get(kind, [])])
        counts: Counter[str] = Counter()
        for r in timed:
            counts.update(r.outcomes.get(kind, Counter()))
        figures.outcomes[kind] = counts
        unexpected = {
            label: n for label, n in counts.items() if label not in EXPECTED[scenario][kind]
        }
        if unexpected:
            shown = ", ".join(f"{label} ×{n}" for label, n in sorted(unexpected.items()))
            figures.failures.append(f"{kind}: {shown}")
    if figures.ops == 0:
        figures.failures.append("no operation completed")
    return figures


def drain(results_queue: Any) -> list[AgentResult]:
    """What is left in the queue once every client has exited."""
    left: list[AgentResult] = []
    while True:
        try:
            left.append(results_queue.get(timeout=1.0))
        except queue.Empty:
            return left


def release_together(barrier: Any, processes: list[Any]) -> None:
    """Pass the start barrier with the agents once every one of them waits at it.

    An agent that fails to set up breaks the barrier itself; one that dies before it
    could (or never arrives) is noticed here, and the barrier broken for the rest.
    Either way the agents say what happened in their figures, or by their absence.
    """
    deadline = time.monotonic() + BARRIER_TIMEOUT_SECONDS
    while not barrier.broken and barrier.n_waiting < len(processes):
        if time.monotonic() > deadline or not all(p.is_alive() for p in processes):
            barrier.abort()
            return
        time.sleep(0.01)
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(BARRIER_TIMEOUT_SECONDS)


@dataclass(frozen=True)
class Job:
    """One group of client processes: ``entry(plan, target, barrier, results)`` per plan."""

    entry: Callable[[Any, Any, Any, Any], None]
    target: Any
    plans: Sequence[Any]  # each with an ``index``
    label: str  # in the process names


@dataclass
class Group:
    """A job's running processes and the queue their figures come back on."""

    processes: list[Any]
    results: Any


@contextlib.contextmanager
def started(jobs: Sequence[Job], *, mode: str) -> Iterator[list[Group]]:
    """Start every job's processes on one barrier, release them together, and yield
    their groups (in the order of ``jobs``); on exit wait for them to end, and end
    the ones that do not."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(sum(len(job.plans) for job in jobs) + 1)
    groups = []
    for job in jobs:
        results_queue = context.Queue()
        processes = [
            context.Process(
                target=job.entry,
                args=(plan, job.target, barrier, results_queue),
                name=f"bench-{mode}-{job.label}-{plan.index}",
                daemon=True,
            )
            for plan in job.plans
        ]
        groups.append(Group(processes=processes, results=results_queue))
    every = [process for group in groups for process in group.processes]
    for process in every:
        process.start()
    try:
        release_together(barrier, every)
        yield groups
    finally:
        for process in every:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()  # one of ours, stuck: it is reported as missing
                process.join(timeout=5)


def collect(group: Group, *, deadline: float) -> list[Any]:
    """The group's figures, one per process, until the deadline; a process that died
    without reporting counts as missing."""
    results: list[Any] = []
    while len(results) < len(group.processes) and time.monotonic() < deadline:
        try:
            results.append(group.results.get(timeout=0.5))
        except queue.Empty:
            if not any(process.is_alive() for process in group.processes):
                results.extend(drain(group.results))
                break
    return results


def run_fleet(
    entry: Callable[[AgentPlan, Any, Any, Any], None],
    target: Any,
    plans: list[AgentPlan],
    *,
    mode: str,
) -> RunFigures:
    """Start one client process per plan (``entry(plan, target, barrier, results)``),
    release them together, and sum up their figures."""
    scenario = plans[0].scenario
    with started([Job(entry, target, plans, label=scenario)], mode=mode) as (group,):
        deadline = time.monotonic() + max(p.seconds for p in plans) + RESULT_GRACE_SECONDS
        results = collect(group, deadline=deadline)
    return summarise(scenario, mode, results, agents=len(plans))
