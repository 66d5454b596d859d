"""The order of a bench run, from an empty workspace to the report.

1. The workspace, the statements per request of the small operations.
2. ``throttle-off``: gunicorn with the per-key throttle off; ``heartbeat`` and
   ``files`` over HTTP (their "on" figures come from step 3, on the same data).
3. gunicorn with the throttle on but never refusing; for each scenario the API run,
   then its direct run: ``heartbeat``, ``lease``, ``files`` (and ``files-1``),
   ``contended``, ``directories``, ``live`` (after its sessions are loaded),
   ``ready`` (after its issues are); then ``events`` (writers doing the files op
   while as many waiters long-poll the event log; no direct run: a ceiling of HTTP
   long polls has no meaning without HTTP); then ``growth``: ``files`` after the
   history is loaded, again with the active file claims beside it, and ``files``
   and ``directories`` once the active directory claims are loaded too, each beside
   its direct run on the same data.
4. ``reference``: the reference calls, one worker with one thread, the server's floor,
   and the same calls in-process with no HTTP server (benchmarks.reference).
5. The workspace is deleted, whatever happened.
"""

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

from benchmarks import agent, cpu, delivery, direct, load, reference
from benchmarks.environment import (
    direct_target,
    git_commit,
    interpreter,
    postgres_setting,
)
from benchmarks.fleet import RunFigures, run_fleet
from benchmarks.report import (
    STATEMENT_KINDS,
    BenchReport,
    GrowthReport,
    ScenarioReport,
    ratio,
)
from benchmarks.server import (
    THROTTLE_NEVER_REFUSES,
    THROTTLE_OFF,
    Server,
    gunicorn,
    server_environment,
)
from benchmarks.statements import count_statements, statements_per_op
from benchmarks.workload import SCENARIOS, AgentPlan
from coordination.services import rate_limits

EXTRAS = ("files-1", "events", "throttle-off", "growth", "reference")
CHOICES = SCENARIOS + EXTRAS
DEFAULT_AGENTS = 16
DEFAULT_SECONDS = 8.0
QUICK_SECONDS = 2.0
QUICK_AGENTS = 2
QUICK_DIVISOR = 100  # the loaded volumes, scaled down
# A session must outlive a run: warn when the TTL leaves less than this beyond it.
TTL_MARGIN_SECONDS = 30


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


class Bench:
    def __init__(self, options: BenchOptions, progress: Callable[[str], None]) -> None:
        self.options = options
        self.progress = progress
        self.report = BenchReport(config=self.config())
        self.server: Server | None = None
        self.bench: load.BenchWorkspace | None = None
        self.direct_target: direct.DirectTarget | None = None

    def wants(self, name: str) -> bool:
        return name in self.options.selected

    # --- the run -------------------------------------------------------------------------

    def run(self) -> BenchReport:
        options = self.options
        if options.quick:
            self.report.notes.append(
                f"quick: {options.seconds:g} s per run, {options.agents} agents,"
                f" loaded volumes scaled down {QUICK_DIVISOR}×"
            )
        ttl = settings.PROJEKTOR_SESSION_TTL_SECONDS
        if ttl < options.seconds + TTL_MARGIN_SECONDS:
            self.report.notes.append(
                f"warning: PROJEKTOR_SESSION_TTL_SECONDS={ttl} is short for {options.seconds:g} s"
                " runs: sessions may lapse mid-run"
            )
        if self.report.config.get("autovacuum") == "off":
            self.report.notes.append(
                "autovacuum is off on this PostgreSQL server: the bench runs VACUUM ANALYZE"
                " before each run instead"
            )
        self.progress(f"Preparing the bench workspace ({options.agents} agents)")
        self.bench = load.create_workspace(options.agents)
        try:
            self.direct_target = self.make_direct_target()
            self.count_statements(
                ["heartbeat", "lease", "files"]
                + (["directories"] if self.wants("directories") or self.wants("growth") else [])
            )
            if self.wants("throttle-off"):
                self.throttle_off_runs()
            if any(self.wants(name) for name in (*SCENARIOS, "files-1", "events", "growth")):
                with self.serving(THROTTLE_NEVER_REFUSES):
                    self.main_runs()
                    if self.wants("events"):
                        self.events_run()
                    if self.wants("growth"):
                        self.growth_runs()
            if self.wants("reference"):
                repetitions = (
                    reference.QUICK_REPETITIONS if options.quick else reference.DEFAULT_REPETITIONS
                )
                self.report.reference = reference.run(
                    self.require_bench(), repetitions, self.progress, options.profile_dir
                )
                self.report.reference_floor = reference.server_floor(
                    self.require_bench(), repetitions, self.progress
                )
                self.report.reference_in_process = reference.in_process_calls(
                    self.require_bench(), repetitions, self.progress
                )
        finally:
            self.progress("Deleting the bench workspace")
            load.drop(self.bench)
        return self.report

    def throttle_off_runs(self) -> None:
        with self.serving(THROTTLE_OFF):
            for name in ("heartbeat", "files"):
                self.report.throttle_off[name] = self.run_api(f"{name} (throttle off)", name)

    def main_runs(self) -> None:
        bench = self.require_bench()
        for scenario in SCENARIOS:
            if scenario == "files" and self.wants("files-1"):
                self.scenario_runs("files-1", "files", agents=1)
            if not self.wants(scenario):
                continue
            if scenario == "live":
                self.step(
                    f"Loading {self.options.volumes.stale_sessions:,} ended or stale sessions"
                    f" and {self.options.volumes.live_sessions:,} live ones",
                    lambda: load.load_sessions(bench, self.options.volumes),
                )
                self.count_statements(["live"], heartbeat_first=bench.live_session_ids)
            if scenario == "ready":
                self.step(
                    f"Loading {self.options.volumes.ready_issues:,} issues",
                    lambda: load.load_ready_issues(bench, self.options.volumes),
                )
                self.count_statements(["ready"])
            self.scenario_runs(scenario, scenario, agents=self.options.agents)

    def scenario_runs(self, name: str, scenario: str, *, agents: int) -> None:
        bench = self.require_bench()
        before = (lambda: load.heartbeat(bench.live_session_ids)) if scenario == "live" else None
        api = self.run_api(name, scenario, agents=agents, before=before)
        ceiling = self.run_direct(name, scenario, agents=agents, before=before)
        self.check_mirror(scenario, ceiling)
        self.report.scenarios.append(
            ScenarioReport(
                name=name,
                scenario=scenario,
                api=api,
                direct=ceiling,
                statements_per_op=statements_per_op(name, self.report.statements, api.outcomes),
            )
        )

    def events_run(self) -> None:
        server, bench = self.require_server(), self.require_bench()
        agents = self.options.agents
        target = agent.HttpTarget(host=server.host, port=server.port, raw_key=bench.raw_key)
        load.settle()
        self.progress(f"events: {agents} writers (files) beside {agents} waiters (GET /events/)")
        figures = delivery.run(bench, target, self.plans("files", agents), waiters=agents)
        self.record("events (writers)", figures.writers)
        latency = figures.latency
        self.progress(
            f"  {'events (delivery)':<24} {figures.waiters} waiters, {latency.count:,} deliveries"
            f"  p50 {latency.p50:.1f} ms  p99 {latency.p99:.1f} ms;"
            f" seen-all {'OK' if figures.seen_all else 'FAILED'}"
        )
        self.report.events = figures
        self.report.scenarios.append(
            ScenarioReport(
                name="events",
                scenario="files",
                api=figures.writers,
                direct=None,
                statements_per_op=statements_per_op(
                    "files", self.report.statements, figures.writers.outcomes
                ),
            )
        )
        failures = [*figures.failures, *figures.problems]
        if not figures.seen_all and not figures.problems:
            failures.append("the waiters did not all see every event (see above)")
        self.report.failures.extend(f"events: {failure}" for failure in failures)
        if failures or figures.writers.failures:
            self.report.failures.append(f"events: gunicorn log:\n{server.log_tail()}")

    def growth_runs(self) -> None:
        bench = self.require_bench()
        volumes = self.options.volumes
        history = (
            f"+ {volumes.history_claims:,} released claims and {volumes.history_conflicts:,}"
            f" conflicts over {len(load.source_tree(volumes.history_paths)):,} paths"
        )
        self.step(f"Loading {history[2:]}", lambda: load.load_history(bench, volumes))
        self.growth_step("history", history, "files (history)", "files")
        sessions = volumes.active_sessions
        active = (
            f"+ {volumes.active_claims:,} other paths claimed by {sessions:,} live"
            f" session{'s' if sessions != 1 else ''}"
        )
        self.step(f"Loading {active[2:]}", lambda: load.load_active_claims(bench, volumes))

        def alive() -> None:
            load.heartbeat(bench.active_session_ids)

        self.growth_step("active", active, "files (active)", "files", before=alive)
        directories = (
            f"+ {volumes.active_directories:,} live directory claims beside the"
            f" {volumes.active_claims:,} file claims"
        )
        self.step(
            f"Loading {directories[2:]}", lambda: load.load_active_directories(bench, volumes)
        )
        self.growth_step(
            "active directories", directories, "files (active dirs)", "files", before=alive
        )
        self.growth_step(
            "directories, active",
            f"directories beside {volumes.active_claims:,} live file and"
            f" {volumes.active_directories:,} directory claims",
            "directories (active)",
            "directories",
            before=alive,
        )

    def growth_step(
        self,
        label: str,
        description: str,
        name: str,
        scenario: str,
        *,
        before: Callable[[], None] | None = None,
    ) -> None:
        """The scenario's API run and its direct ceiling on the grown data, beside the
        scenario's run on the empty workspace."""
        empty = self.report.scenario(scenario)
        api = self.run_api(name, scenario, before=before)
        ceiling = self.run_direct(name, scenario, agents=self.options.agents, before=before)
        self.check_mirror(scenario, ceiling)
        self.report.growth.append(
            GrowthReport(
                label,
                description,
                api,
                ratio(api.ops_per_second, empty.api.ops_per_second if empty else None),
                direct=ceiling,
            )
        )

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
