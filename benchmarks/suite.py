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

from collections.abc import Callable

from django.conf import settings

from benchmarks import agent, delivery, load, reference
from benchmarks.report import BenchReport, GrowthReport, ScenarioReport, ratio
from benchmarks.runs import BenchRuns
from benchmarks.server import THROTTLE_NEVER_REFUSES, THROTTLE_OFF
from benchmarks.statements import statements_per_op
from benchmarks.workload import SCENARIOS

EXTRAS = ("files-1", "events", "throttle-off", "growth", "reference")
CHOICES = SCENARIOS + EXTRAS
DEFAULT_AGENTS = 16
DEFAULT_SECONDS = 8.0
QUICK_SECONDS = 2.0
QUICK_AGENTS = 2
QUICK_DIVISOR = 100  # the loaded volumes, scaled down
# A session must outlive a run: warn when the TTL leaves less than this beyond it.
TTL_MARGIN_SECONDS = 30


class Bench(BenchRuns):
    """The bench run in its order (this module's docstring)."""

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
