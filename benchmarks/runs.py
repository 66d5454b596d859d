"""The bench's runs: one scenario's fleet, over HTTP against gunicorn or direct on the
database (its ceiling), its progress line, the statements its requests make, the server
it runs against; and the options and the report they share. ``suite`` puts them in
order."""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.db import BaseDatabaseCache
from django.db import connection
from django.test import override_settings

from benchmarks import agent, cpu, direct, load
from benchmarks.environment import direct_target, git_commit, interpreter, postgres_setting
from benchmarks.fleet import RunFigures, run_fleet
from benchmarks.report import STATEMENT_KINDS, BenchReport
from benchmarks.server import THROTTLE_NEVER_REFUSES, Server, gunicorn, server_environment
from benchmarks.statements import count_statements
from benchmarks.workload import AgentPlan
from coordination.services import rate_limits


@dataclass(frozen=True)
class BenchOptions:
    agents: int
    seconds: float
    workers: int
    threads: int
    selected: tuple[str, ...]
    quick: bool
    volumes: load.Volumes
    profile_dir: Path | None = None  # a pyinstrument profile of each API run, there


class BenchRuns:
    """What every step of the bench shares: its options, its report, its workspace
    and the server of the moment; and how one run is made and recorded."""

    def __init__(self, options: BenchOptions, progress: Callable[[str], None]) -> None:
        self.options = options
        self.progress = progress
        self.report = BenchReport(config=self.config())
        self.server: Server | None = None
        self.bench: load.BenchWorkspace | None = None
        self.direct_target: direct.DirectTarget | None = None

    def wants(self, name: str) -> bool:
        return name in self.options.selected

    # --- one run -------------------------------------------------------------------------

    def plans(self, scenario: str, agents: int) -> list[AgentPlan]:
        bench = self.require_bench()
        issues = {
            "files": bench.files_issues,
            "contended": bench.contended_issues,
            "directories": bench.directories_issues,
        }.get(scenario, bench.lease_issues)
        return [
            AgentPlan(
                scenario=scenario,
                index=index,
                agent_name=bench.agents[index].name,
                agent_id=bench.agents[index].pk,
                workspace_id=bench.pk,
                issue_id=issues[index],
                paths=(
                    load.own_paths(index)
                    if scenario == "files"
                    else load.contended_pool()
                    if scenario == "contended"
                    else load.shared_tree()
                    if scenario == "directories"
                    else ()
                ),
                seconds=self.options.seconds,
                seed=zlib.crc32(f"{scenario}/{index}".encode()),
            )
            for index in range(agents)
        ]

    def run_api(
        self,
        name: str,
        scenario: str,
        *,
        agents: int | None = None,
        before: Callable[[], None] | None = None,
    ) -> RunFigures:
        server, bench = self.require_server(), self.require_bench()
        plans = self.plans(scenario, agents or self.options.agents)
        target = agent.HttpTarget(host=server.host, port=server.port, raw_key=bench.raw_key)
        load.settle()
        if before:
            before()
        cpu_before = cpu.server_cpu_seconds(server)
        figures = run_fleet(agent.main, target, plans, mode="api")
        cpu_after = cpu.server_cpu_seconds(server)
        figures.server_cpu_ms = cpu.per_request_ms(cpu_before, cpu_after, figures.requests_sent)
        if self.options.profile_dir:
            cpu.collect_profiles(server, self.options.profile_dir, name)
        self.record(name, figures)
        if figures.failures:
            self.report.failures.append(f"{name} api: gunicorn log:\n{server.log_tail()}")
        return figures

    def run_direct(
        self,
        name: str,
        scenario: str,
        *,
        agents: int,
        before: Callable[[], None] | None = None,
    ) -> RunFigures:
        plans = self.plans(scenario, agents)
        load.settle()
        if before:
            before()
        figures = run_fleet(direct.main, self.direct_target, plans, mode="direct")
        self.record(name, figures)
        return figures

    def check_mirror(self, scenario: str, ceiling: RunFigures) -> None:
        """Fail the run on a request kind whose direct statements no longer match the
        API's (minus its rate-limit counter): direct.py has to follow the services."""
        # The counted requests ran with the throttle on: one upsert on the database cache
        # (none counted on SQLite, whose counters are in a file of their own).
        throttle = 1 if isinstance(caches[rate_limits.CACHE_ALIAS], BaseDatabaseCache) else 0
        for kind in ceiling.requests:
            counted = self.report.statements.get(STATEMENT_KINDS.get((scenario, kind), ""))
            sent = ceiling.statements_per_request(kind)
            if scenario in ("contended", "directories") or counted is None or sent is None:
                continue  # they mix refusals and claims: compared under files
            expected = counted - throttle
            drift = (
                f"statement count: {scenario} {kind}: the API ran {expected} statements"
                f" (without the throttle's), direct.py {sent:g}: it no longer mirrors the service"
            )
            if abs(sent - expected) > 0.01 and drift not in self.report.failures:
                self.report.failures.append(drift)

    def record(self, name: str, figures: RunFigures) -> None:
        latency = figures.op_latency
        agents = f"{figures.agents} agent{'s' if figures.agents > 1 else ''}"
        self.progress(
            f"  {name:<24} {figures.mode:<6} {agents:>9}"
            f" {figures.ops_per_second:>9,.1f} ops/s  p50 {latency.p50:.1f} ms"
            f"  p99 {latency.p99:.1f} ms"
            + (f"  {figures.server_cpu_ms:.2f} ms CPU/req" if figures.server_cpu_ms else "")
            + (f"  FAILED: {'; '.join(figures.failures)[:300]}" if figures.failures else "")
        )
        self.report.failures.extend(f"{name} {figures.mode}: {f}" for f in figures.failures)

    # --- helpers -------------------------------------------------------------------------

    @contextmanager
    def serving(self, throttle_key: str) -> Iterator[Server]:
        """gunicorn with this key throttle, as ``self.server`` while the block runs."""
        self.progress(
            f"Starting gunicorn ({self.options.workers} workers × {self.options.threads}"
            f" threads, key throttle {throttle_key})"
        )
        profile_dir = self.options.profile_dir
        with gunicorn(
            env={
                **server_environment(throttle_key),
                **({cpu.PROFILE_DIR_VARIABLE: str(profile_dir)} if profile_dir else {}),
            },
            workers=self.options.workers,
            threads=self.options.threads,
            app=cpu.PROFILED_APP if profile_dir else "projektor.wsgi",
        ) as server:
            self.server = server
            try:
                yield server
            finally:
                self.server = None
        self.progress("Stopped gunicorn")

    def step(self, message: str, action: Callable[[], None]) -> None:
        self.progress(message)
        started = time.perf_counter()
        action()
        self.progress(f"  done in {time.perf_counter() - started:.1f} s")

    def count_statements(self, groups: list[str], heartbeat_first: list[int] | None = None) -> None:
        if heartbeat_first:
            load.heartbeat(heartbeat_first)
        # The counter's requests go through Django's test client in this process, never
        # over a network: the host it names need not be one ALLOWED_HOSTS lists.
        with override_settings(ALLOWED_HOSTS=["*"]):
            counts, failures = count_statements(
                self.require_bench(), groups, throttle_rate=THROTTLE_NEVER_REFUSES
            )
        self.report.statements.update(counts)
        self.report.failures.extend(f"statement count: {failure}" for failure in failures)
        self.progress("Statements per request: " + ", ".join(f"{k} {v}" for k, v in counts.items()))

    def make_direct_target(self) -> direct.DirectTarget:
        bench = self.require_bench()
        paths = {path for i in range(self.options.agents) for path in load.own_paths(i)}
        return direct_target(bench, paths | set(load.contended_pool()) | set(load.shared_tree()))

    def require_bench(self) -> load.BenchWorkspace:
        assert self.bench is not None
        return self.bench

    def require_server(self) -> Server:
        assert self.server is not None
        return self.server

    def config(self) -> dict[str, Any]:
        options = self.options
        return {
            "database": connection.vendor,
            "workers": options.workers,
            "threads": options.threads,
            "agents": options.agents,
            "seconds": options.seconds,
            "cpu_count": os.cpu_count(),
            "git_commit": git_commit(),
            "python": interpreter(),
            "quick": options.quick,
            "scenarios": list(options.selected),
            "session_ttl_seconds": settings.PROJEKTOR_SESSION_TTL_SECONDS,
            "autovacuum": postgres_setting("autovacuum"),
            "volumes": asdict(options.volumes),
        }
