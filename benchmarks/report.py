"""The bench's figures: one table for people, one JSON document for comparing runs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from benchmarks.delivery import LATENCY_SOURCE, DeliveryFigures
from benchmarks.fleet import Latency, RunFigures
from benchmarks.in_process import PAUSE_SECONDS, InProcessCall
from benchmarks.reference import FLOOR_NAME, ReferenceCall, ServerFloor

# Which per-request statement counts belong to a request kind of a scenario.
STATEMENT_KINDS = {
    ("heartbeat", "heartbeat"): "heartbeat",
    ("lease", "claim"): "lease claim",
    ("lease", "release"): "lease release",
    ("files", "claim"): "files claim",
    ("files", "release"): "files release",
    ("contended", "claim"): "files claim",
    ("contended", "release"): "files release",
    ("directories", "claim"): "directory claim",
    ("directories", "release"): "directory release",
    ("live", "list"): "live list",
    ("ready", "list"): "ready list",
}


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


@dataclass
class ScenarioReport:
    """A scenario's API run, its direct ceiling and its statements per op."""

    name: str  # the scenario, or "files-1", "events"
    scenario: str  # what the agents did (workload.SCENARIOS)
    api: RunFigures
    direct: RunFigures | None = None  # None: no ceiling to compare with (events)
    statements_per_op: float | None = None

    @property
    def api_over_direct(self) -> float | None:
        if self.direct is None:
            return None
        return ratio(self.api.ops_per_second, self.direct.ops_per_second)


@dataclass
class GrowthReport:
    label: str
    description: str
    api: RunFigures
    ratio_to_empty: float | None
    direct: RunFigures | None = None  # the same transactions on the same data

    @property
    def api_over_direct(self) -> float | None:
        if self.direct is None:
            return None
        return ratio(self.api.ops_per_second, self.direct.ops_per_second)


@dataclass
class BenchReport:
    config: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    statements: dict[str, int] = field(default_factory=dict)
    scenarios: list[ScenarioReport] = field(default_factory=list)
    throttle_off: dict[str, RunFigures] = field(default_factory=dict)
    growth: list[GrowthReport] = field(default_factory=list)
    events: DeliveryFigures | None = None
    reference: list[ReferenceCall] = field(default_factory=list)
    reference_floor: ServerFloor | None = None
    reference_in_process: list[InProcessCall] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def scenario(self, name: str) -> ScenarioReport | None:
        return next((row for row in self.scenarios if row.name == name), None)


# --- the table ---------------------------------------------------------------------


def number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def count(value: float | None) -> str:
    """A statement count: whole, or with one decimal when it is an average."""
    if value is None:
        return "—"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def statuses(counts: Counter[str]) -> str:
    """``201×1,234 200×1,234 conflict×56``, most frequent first."""
    return " ".join(f"{label}×{count:,}" for label, count in counts.most_common())


COLUMNS = (
    ("scenario", 12, "<"),
    ("agents", 6, ">"),
    ("ops/s", 9, ">"),
    ("p50", 8, ">"),
    ("p95", 8, ">"),
    ("p99 ms", 8, ">"),
    ("statuses", 36, "<"),
    ("stmts/op", 8, ">"),
    ("CPU ms/req", 10, ">"),
    ("direct ops/s", 12, ">"),
    ("API÷direct", 10, ">"),
)


def line(*cells: str) -> str:
    return "  ".join(
        f"{cell:{align}{width}}" for cell, (_, width, align) in zip(cells, COLUMNS, strict=True)
    ).rstrip()


def latency_cells(latency: Latency) -> tuple[str, str, str]:
    return number(latency.p50, 1), number(latency.p95, 1), number(latency.p99, 1)


def scenario_lines(row: ScenarioReport, statement_counts: dict[str, int]) -> list[str]:
    api = row.api
    lines = [
        line(
            row.name,
            str(api.agents),
            number(api.ops_per_second),
            *latency_cells(api.op_latency),
            statuses(api.statuses),
            count(row.statements_per_op),
            number(api.server_cpu_ms, 2),
            number(row.direct.ops_per_second) if row.direct else "n/a",
            number(row.api_over_direct, 2) if row.direct else "n/a",
        )
    ]
    if len(api.requests) > 1:  # a cycle of requests: each kind on its own line
        for kind, latency in api.requests.items():
            statements = statement_counts.get(STATEMENT_KINDS.get((row.scenario, kind), ""))
            lines.append(
                line(
                    f"  · {kind}",
                    "",
                    "",
                    *latency_cells(latency),
                    statuses(api.outcomes.get(kind, Counter())),
                    count(statements),
                    "",
                    "",
                    "",
                )
            )
    return lines


def render(report: BenchReport) -> str:
    config = report.config
    out = [
        f"Projektor fleet bench on {config['database']}: gunicorn {config['workers']} workers"
        f" × {config['threads']} threads (gthread), {config['cpu_count']} CPUs,"
        f" {config['seconds']:g} s per run, commit {config.get('git_commit') or '?'}"
        + (f", {config['python']}" if config.get("python") else ""),
        *report.notes,
        "",
        line(*(name for name, _, _ in COLUMNS)),
    ]
    main = [row for row in report.scenarios if row.name != "files-1"]
    for row in main:
        out.extend(scenario_lines(row, report.statements))
    out.append(
        "(latency: per op; a lease/files op is a claim and its release, shown below it;"
        " CPU: all of gunicorn's processes, per request sent)"
    )
    if report.events:
        out += ["", *delivery_lines(report.events)]
    if report.throttle_off:
        out += [
            "",
            "Rate-limit counter (per-key throttle on but never refusing, vs off; each"
            " ÷ the scenario's direct ceiling):",
        ]
        for name, off in report.throttle_off.items():
            on = report.scenario(name)
            on_rate = on.api.ops_per_second if on else None
            ceiling = on.direct.ops_per_second if on and on.direct else None
            out.append(
                f"  {name:<12} on {number(on_rate):>7} ops/s (÷direct"
                f" {number(ratio(on_rate, ceiling), 2)})   off {number(off.ops_per_second):>7}"
                f" ops/s (÷direct {number(ratio(off.ops_per_second, ceiling), 2)})"
                f"   on÷off {number(ratio(on_rate, off.ops_per_second), 2)}"
                f"   CPU/req on {number(on.api.server_cpu_ms if on else None, 2)}"
                f" off {number(off.server_cpu_ms, 2)} ms"
            )
    if report.growth:
        files = report.scenario("files")
        out += [
            "",
            f"Growth ({files.api.agents if files else '?'} agents; ×: ratio to the scenario's"
            " empty run, files unless named; then the direct ceiling on the same data):",
        ]
        for growth in report.growth:
            api = growth.api
            p50, p95, p99 = latency_cells(api.op_latency)
            out.append(
                f"  {growth.description:<66} {number(api.ops_per_second):>7} ops/s"
                f"  p50 {p50} p95 {p95} p99 {p99} ms  ×{number(growth.ratio_to_empty, 2)}"
                f"  direct {number(growth.direct.ops_per_second if growth.direct else None)}"
                f" ops/s, API÷direct {number(growth.api_over_direct, 2)}"
                f"  CPU {number(api.server_cpu_ms, 2)} ms/req"
            )
    alone = report.scenario("files-1")
    if alone:
        p50, p95, p99 = latency_cells(alone.api.op_latency)
        claim, release = alone.api.requests.get("claim"), alone.api.requests.get("release")
        claim_p50 = number(claim.p50 if claim else None, 1)
        release_p50 = number(release.p50 if release else None, 1)
        out += [
            "",
            f"One agent alone (files-1): {number(alone.api.ops_per_second)} ops/s,"
            f" p50 {p50} p95 {p95} p99 {p99} ms (claim p50 {claim_p50}, release p50 {release_p50});"
            f" direct {number(alone.direct.ops_per_second if alone.direct else None)} ops/s,"
            f" API÷direct {number(alone.api_over_direct, 2)}",
        ]
    if report.reference:
        out += ["", *reference_lines(report.reference, report.reference_floor)]
    if report.reference_in_process:
        out += ["", *in_process_lines(report.reference_in_process)]
    if report.failures:
        out += ["", f"FAILURES ({len(report.failures)}):", *(f"  {f}" for f in report.failures)]
    return "\n".join(out)


def reference_lines(calls: list[ReferenceCall], floor: ServerFloor | None = None) -> list[str]:
    lines = [
        "Reference calls (gunicorn 1 worker × 1 thread, one kept-alive client, calls one"
        " after another; the server's CPU per call against its target):",
        *(
            f"  {call.name:<20} CPU {number(call.cpu_ms, 2):>6} ms   wall"
            f" {number(call.wall_ms, 2):>6} ms   ({call.repetitions:,} calls)"
            f"   target ≤ {call.target_ms:.2f} ms: {verdict(call.met)}"
            for call in calls
        ),
    ]
    if floor is not None:
        lines.append(
            f"  {FLOOR_NAME:<20} CPU {number(floor.cpu_ms, 2):>6} ms   wall"
            f" {number(floor.wall_ms, 2):>6} ms   ({floor.repetitions:,} calls)"
            "   gunicorn serving /healthz's bytes from a WSGI app that does nothing else"
        )
    return lines


def in_process_lines(calls: list[InProcessCall]) -> list[str]:
    pause = f"{PAUSE_SECONDS * 1000:g} ms"
    return [
        "The same calls in-process (the app called directly, no HTTP server; its CPU per"
        f" call back to back, and with a {pause} pause after each call):",
        *(
            f"  {call.name:<20} CPU {call.back_to_back_ms:>6.2f} ms back to back"
            f"   {call.paused_ms:>6.2f} ms paused   ({call.repetitions:,} calls)"
            for call in calls
        ),
    ]


def verdict(met: bool | None) -> str:
    return "no CPU figure" if met is None else ("met" if met else "NOT met")


def delivery_lines(events: DeliveryFigures) -> list[str]:
    writers, latency = events.writers, events.latency
    agents = writers.agents
    seen = sorted(set(events.seen.values()))
    if events.seen_all:
        check = (
            f"OK: each of the {events.waiters} waiters saw all {events.table_events:,} events"
            " of the table after its cursor, in id order, none twice"
        )
    else:
        shown = ", ".join(f"{n:,}" for n in seen) or "none"
        check = (
            f"FAILED: the table has {events.table_events:,} events after the cursor; the"
            f" {len(events.seen)} of {events.waiters} waiters that reported saw {shown}"
        )
    return [
        f"Event delivery (events): {agents} writers claim and release files as in files,"
        f" while {events.waiters} waiters long-poll GET /events/?wait={events.wait_seconds}"
        f"&limit={events.page_limit}, each passing back its cursor's next:",
        f"  writers      {number(writers.ops_per_second)} cycles/s"
        f" (claim + release; direct ceiling n/a)",
        f"  delivery     p50 {number(latency.p50, 1)}  p95 {number(latency.p95, 1)}"
        f"  p99 {number(latency.p99, 1)}  max {number(latency.max, 1)} ms"
        f" over {latency.count:,} deliveries; {events.requests:,} polls,"
        f" {events.empty_answers:,} ended empty",
        f"  seen-all     {check}",
        *(f"    {problem}" for problem in events.problems),
        f"  (delivery latency: {LATENCY_SOURCE}; {events.clock})",
    ]


# --- JSON ----------------------------------------------------------------------------


def latency_json(latency: Latency) -> dict[str, float]:
    return {
        "p50": round(latency.p50, 3),
        "p95": round(latency.p95, 3),
        "p99": round(latency.p99, 3),
        "max": round(latency.max, 3),
    }


def figures_json(figures: RunFigures) -> dict[str, Any]:
    return {
        "mode": figures.mode,
        "agents": figures.agents,
        "seconds": round(figures.seconds, 3),
        "ops": figures.ops,
        "ops_per_s": round(figures.ops_per_second, 2),
        "latency_ms": latency_json(figures.op_latency),
        "statuses": dict(figures.statuses),
        "requests": {
            kind: {
                "count": latency.count,
                "latency_ms": latency_json(latency),
                "statuses": dict(figures.outcomes.get(kind, Counter())),
                "statements": (
                    figures.statements_per_request(kind) if figures.mode == "direct" else None
                ),
            }
            for kind, latency in figures.requests.items()
        },
        # Sent by the direct clients themselves; the API's are counted per request kind
        # in the command (BenchReport.statements).
        "statements_per_op": (
            round(figures.statements_per_op, 2) if figures.mode == "direct" else None
        ),
        "reconnects": figures.reconnects,
        "server_cpu_ms_per_request": (
            round(figures.server_cpu_ms, 4) if figures.server_cpu_ms is not None else None
        ),
        "failures": figures.failures,
    }


def as_json(report: BenchReport) -> dict[str, Any]:
    scenarios = {
        row.name: {
            "scenario": row.scenario,
            "agents": row.api.agents,
            "statements_per_op": row.statements_per_op,
            "api": figures_json(row.api),
            "direct": figures_json(row.direct) if row.direct else None,
            "api_over_direct": row.api_over_direct,
        }
        for row in report.scenarios
    }
    throttle = {}
    for name, off in report.throttle_off.items():
        on = report.scenario(name)
        on_rate = on.api.ops_per_second if on else None
        throttle[name] = {
            "on_ops_per_s": on_rate,
            "off_ops_per_s": off.ops_per_second,
            "on_over_off": ratio(on_rate, off.ops_per_second),
            "off_over_direct": ratio(
                off.ops_per_second, on.direct.ops_per_second if on and on.direct else None
            ),
            "off": figures_json(off),
        }
    growth = {
        item.label: {
            "description": item.description,
            "api": figures_json(item.api),
            "ratio_to_empty": item.ratio_to_empty,
            "direct": figures_json(item.direct) if item.direct else None,
            "api_over_direct": item.api_over_direct,
        }
        for item in report.growth
    }
    return {
        "config": report.config,
        "notes": report.notes,
        "statements": report.statements,
        "scenarios": scenarios,
        "throttle": throttle,
        "growth": growth,
        "events": delivery_json(report.events) if report.events else None,
        "reference_calls": {
            call.name: {
                "calls": call.repetitions,
                "server_cpu_ms": round(call.cpu_ms, 4) if call.cpu_ms is not None else None,
                "wall_ms": round(call.wall_ms, 4),
                "target_ms": call.target_ms,
                "met": call.met,
            }
            for call in report.reference
        },
        "reference_floor": (
            {
                "calls": floor.repetitions,
                "server_cpu_ms": round(floor.cpu_ms, 4) if floor.cpu_ms is not None else None,
                "wall_ms": round(floor.wall_ms, 4),
            }
            if (floor := report.reference_floor) is not None
            else None
        ),
        "reference_in_process": {
            call.name: {
                "calls": call.repetitions,
                "back_to_back_cpu_ms": round(call.back_to_back_ms, 4),
                "paused_cpu_ms": round(call.paused_ms, 4),
                "pause_ms": PAUSE_SECONDS * 1000,
            }
            for call in report.reference_in_process
        },
        "failures": report.failures,
    }


def delivery_json(events: DeliveryFigures) -> dict[str, Any]:
    return {
        "writers": events.writers.agents,
        "waiters": events.waiters,
        "wait_seconds": events.wait_seconds,
        "page_limit": events.page_limit,
        "writer_cycles_per_s": round(events.writers.ops_per_second, 2),
        "delivery_latency_ms": {**latency_json(events.latency), "count": events.latency.count},
        "latency_source": LATENCY_SOURCE,
        "clock": events.clock,
        "table_events": events.table_events,
        "seen_per_waiter": {str(index): n for index, n in sorted(events.seen.items())},
        "seen_all": events.seen_all,
        "problems": events.problems,
        "polls": events.requests,
        "empty_answers": events.empty_answers,
        "statuses": dict(events.statuses),
        "failures": events.failures,
    }
