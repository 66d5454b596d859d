"""Measure issue-lease claims under concurrency on the configured database.

Prints throughput, latency percentiles and the outcome mix for three workloads:

- ``one-project``: every worker claims its own issues, all in one project, so
  admission (the per-project lock of invariant 3 (the WIP cap)) serialises them;
- ``per-project``: the same, but each worker in its own project: nothing to share;
- ``contended``: all workers fight over four issues (exclusivity, stale reclaim).

The data lives in a throw-away workspace that is deleted afterwards.
"""

import statistics
import threading
import time
import uuid
from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connections

from benchmarks.fleet import percentile
from coordination.errors import CoordinationError
from coordination.models import Issue, Project, Workspace
from coordination.services import agents, leases, logs


class Command(BaseCommand):
    help = "Benchmark concurrent issue claims (throughput, latency percentiles, outcomes)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workers", type=int, default=16)
        parser.add_argument("--claims", type=int, default=50, help="claims per worker")
        parser.add_argument("--wip-limit", type=int, default=1000)

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.create(slug=f"bench-{uuid.uuid4().hex[:8]}", name="Bench")
        try:
            for workload in ("one-project", "per-project", "contended"):
                self.run_workload(workspace, workload, **options)
        finally:
            logs.delete_workspace(workspace)  # its WIP-cap denials go with it

    def run_workload(
        self,
        workspace: Workspace,
        workload: str,
        *,
        workers: int,
        claims: int,
        wip_limit: int,
        **_: Any,
    ) -> None:
        projects = [
            Project.objects.create(
                workspace=workspace,
                key=f"{workload}-{n}",
                name=workload,
                agent_wip_limit=wip_limit,
            )
            for n in range(workers if workload == "per-project" else 1)
        ]
        issue_count = 4 if workload == "contended" else workers * claims
        issues = Issue.objects.bulk_create(
            # Worker w claims issues w*claims .. w*claims+claims-1: per-project puts
            # exactly those in its own project.
            Issue(
                workspace=workspace,
                project=projects[(n // claims) % len(projects)],
                title=f"bench {n}",
            )
            for n in range(issue_count)
        )
        sessions = [
            agents.register_session(workspace=workspace, agent_name=f"{workload}-{n}")
            for n in range(workers)
        ]
        latencies: list[float] = []
        outcomes: Counter[str] = Counter()
        lock = threading.Lock()
        barrier = threading.Barrier(workers)

        def worker(index: int) -> None:
            mine: list[float] = []
            seen: Counter[str] = Counter()
            barrier.wait()
            for n in range(claims):
                issue = issues[(index * claims + n) % issue_count]
                started = time.perf_counter()
                try:
                    claimed = leases.claim_issue(
                        workspace=workspace, issue_id=issue.pk, session_id=sessions[index].pk
                    )
                    seen["claimed" if claimed.created else "already_held"] += 1
                except CoordinationError as error:
                    seen[error.code] += 1
                mine.append(time.perf_counter() - started)
            connections.close_all()
            with lock:
                latencies.extend(mine)
                outcomes.update(seen)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started

        latencies.sort()
        ms = [value * 1000 for value in latencies]
        self.stdout.write(
            f"{workload:>11} on {connections['default'].vendor}: {len(ms)} claims by {workers} "
            f"workers in {elapsed:.2f} s = {len(ms) / elapsed:,.0f} claims/s; latency ms "
            f"p50 {percentile(ms, 0.5):.2f}  p95 {percentile(ms, 0.95):.2f}  "
            f"p99 {percentile(ms, 0.99):.2f}  max {ms[-1]:.2f}  mean {statistics.fmean(ms):.2f}"
        )
        total = sum(outcomes.values())
        mix = ", ".join(f"{code} {count / total:.1%}" for code, count in outcomes.most_common())
        self.stdout.write(f"{'':>11}  outcomes: {mix}")
