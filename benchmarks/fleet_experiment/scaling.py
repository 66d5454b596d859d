"""Does the fleet scale? (``bench_fleet --scaling 1,4,8,16``)

The claims condition at each runner count, over one plan wide enough for the
largest (``4 ×`` its runners issues at least: the same generator, so the same
ingredients, hot files, ``blocks`` links and crashes, only more of them), each count
on a fresh database, repository and gunicorn. Per count: issues per minute, the
speed-up over the fewest runners, the CPU the runners (their own, and their agents,
hooks and git), the server and the machine spent over the run, and the plan's critical
path (its longest chain of ``blocks`` links, in seconds of scripted work): a plan whose
critical path is most of a run cannot go faster with more runners. The claims
condition checks each landing again after its rebase, one at a time: the command runs
the scaling with a check of 0 seconds unless told otherwise (``--check-seconds``), so
that the runners, not the check, are measured.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.fleet_experiment.condition import Condition
from benchmarks.fleet_experiment.databases import Databases
from benchmarks.fleet_experiment.report import bar
from benchmarks.fleet_experiment.settings import Progress, Settings
from demo.workbench.plan import Plan

ISSUES_PER_RUNNER = 4  # the plan's width: issues for each of the most runners, at least


def plan_issues(settings: Settings, counts: list[int]) -> int:
    return max(settings.issues, ISSUES_PER_RUNNER * max(counts))


def critical_path(plan: Plan) -> dict[str, Any]:
    """The longest chain of ``blocks`` links, in seconds of the agents' scripted work
    (each issue's ``work_seconds``; blockers are always earlier keys)."""
    by_key = {issue.key: issue for issue in plan.issues}
    longest: dict[int, tuple[float, list[int]]] = {}
    for issue in sorted(plan.issues, key=lambda i: i.key):
        before = max(
            (longest[key] for key in issue.blocked_by if key in by_key),
            key=lambda chain: chain[0],
            default=(0.0, []),
        )
        longest[issue.key] = (before[0] + issue.work_seconds, [*before[1], issue.key])
    seconds, chain = max(longest.values(), key=lambda chain: chain[0], default=(0.0, []))
    return {
        "seconds": round(seconds, 2),
        "chain": chain,
        "work_seconds_total": round(sum(issue.work_seconds for issue in plan.issues), 2),
        "links": sum(len(issue.blocked_by) for issue in plan.issues),
        "crashes": sum(1 for issue in plan.issues if issue.crash),
    }


def run(
    settings: Settings,
    counts: list[int],
    databases: Databases,
    where: Path,
    progress: Progress,
) -> dict[str, Any]:
    """Each count in turn (the databases' template already migrated)."""
    runs: dict[int, dict[str, Any]] = {}
    path: dict[str, Any] = {}
    for count in counts:
        directory = where / f"runners-{count}"
        directory.mkdir()
        at_count = replace(settings, runners=count)

        def said(message: str, count: int = count) -> None:
            progress(f"{count} runners: {message}")

        said(f"{settings.issues} issues")
        condition = Condition(
            "claims", at_count, databases.fresh(f"scale_{count}"), directory, said
        )
        runs[count] = condition.run()
        if not path:
            path = critical_path(Plan.load(directory / "plan.json"))
    return {
        "plan": {"issues": settings.issues, "seed": settings.seed, "critical_path": path},
        "scaling": rows(runs, path),
        "runs": {str(n): r for n, r in runs.items()},
    }


def rows(runs: dict[int, dict[str, Any]], path: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per count: throughput, speed-up over the fewest runners, CPU."""
    fewest = runs[min(runs)]
    base_rate, base_wall = fewest["issues_per_minute"], fewest["wall_seconds"]
    table = []
    for count, result in sorted(runs.items()):
        cpu, wall, done = result["cpu"], result["wall_seconds"], result["issues_done"]
        server = cpu["server_seconds"]

        def per_issue(seconds: float | None, done: int = done) -> float | None:
            return round(seconds / done, 3) if seconds is not None and done else None

        def cores(seconds: float | None, wall: float = wall) -> float | None:
            return round(seconds / wall, 3) if seconds is not None and wall > 0 else None

        table.append(
            {
                "runners": count,
                "issues": result["issues"],
                "issues_done": done,
                "wall_seconds": wall,
                "issues_per_minute": result["issues_per_minute"],
                "speedup": round(result["issues_per_minute"] / base_rate, 2) if base_rate else None,
                "runners_cpu_seconds": cpu["runners_seconds"],
                "runners_own_cpu_seconds": cpu["runners_own_seconds"],
                "runner_children_cpu_seconds": cpu["runner_children_seconds"],
                "server_cpu_seconds": server,
                "runners_cpu_per_issue": per_issue(cpu["runners_seconds"]),
                "runners_own_cpu_per_issue": per_issue(cpu["runners_own_seconds"]),
                "runner_children_cpu_per_issue": per_issue(cpu["runner_children_seconds"]),
                "server_cpu_per_issue": per_issue(server),
                "runners_cores": cores(cpu["runners_seconds"]),
                "server_cores": cores(server),
                "bench_cpu_seconds": cpu["bench_seconds"],
                "machine_busy_share": cpu["machine_busy_share"],
                "cores": cpu["cores"],
                "critical_path_seconds": path.get("seconds"),
                "critical_path_share": (
                    round(path["seconds"] / base_wall, 3) if path and base_wall else None
                ),
                "starts_refused": result["starts_refused"],
                "landing_waits": result["landing_waits"],
                "edits_refused": result["edits_refused"],
                "conflicting_integrations": result["conflicting_integrations"],
                "red_landings": result["red_landings"],
                "crashes": result["crashes"],
                "server_errors": result["server_errors"] + result["client_5xx"],
            }
        )
    return table


HEADER = [
    ("runners", lambda r: str(r["runners"])),
    ("done", lambda r: f"{r['issues_done']}/{r['issues']}"),
    ("wall", lambda r: f"{r['wall_seconds']:.0f} s"),
    ("issues/min", lambda r: f"{r['issues_per_minute']:.2f}"),
    ("speed-up", lambda r: "-" if r["speedup"] is None else f"{r['speedup']:.2f}×"),
    (
        "runners' CPU (own + children)",
        lambda r: (
            f"{r['runners_cpu_seconds']:.0f} s ({r['runners_own_cpu_seconds']:.0f}"
            f" + {r['runner_children_cpu_seconds']:.0f})"
        ),
    ),
    ("server CPU", lambda r: seconds(r["server_cpu_seconds"])),
    (
        "CPU per issue (runners + server)",
        lambda r: f"{r['runners_cpu_per_issue'] or 0:.2f} + {r['server_cpu_per_issue'] or 0:.2f} s",
    ),
    ("machine busy", lambda r: share(r["machine_busy_share"])),
    ("starts refused", lambda r: str(r["starts_refused"])),
    ("conflicts", lambda r: str(r["conflicting_integrations"])),
    ("red", lambda r: str(r["red_landings"])),
    ("5xx", lambda r: str(r["server_errors"])),
]


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} s"


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def render(results: dict[str, Any]) -> str:
    table = results["scaling"]
    cells = [[cell(row) for _, cell in HEADER] for row in table]
    widths = [max(len(label), *(len(c[n]) for c in cells)) for n, (label, _) in enumerate(HEADER)]
    lines = [
        "| "
        + " | ".join(label.ljust(w) for (label, _), w in zip(HEADER, widths, strict=True))
        + " |"
    ]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += [
        "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in cells
    ]
    path = results["plan"]["critical_path"]
    fewest = table[0]
    lines.append(
        f"\nThe plan: {results['plan']['issues']} issues, {path['work_seconds_total']:.0f} s of"
        f" scripted work, {path['links']} blocks links, {path['crashes']} crashes; its critical"
        f" path {path['seconds']:.1f} s ({len(path['chain'])} issues), "
        f"{share(fewest['critical_path_share'])} of the {fewest['runners']}-runner run's time."
    )
    lines.append(
        f"Machine: {fewest['cores']} cores. CPU is over the run (runners' start to the last"
        " issue done), the runners' children being their agents, the hooks those ran and git;"
        " the bench's own (the person polling and accepting): "
        + ", ".join(f"{seconds(row['bench_cpu_seconds'])}" for row in table)
        + "."
    )
    lines += [f"scaling: {note}" for note in notes(table)]
    return "\n".join(lines)


def notes(table: list[dict[str, Any]]) -> list[str]:
    """Where throughput falls as runners are added (the fleet's promise is that it does not)."""
    said = []
    for before, after in zip(table, table[1:], strict=False):
        if after["issues_per_minute"] < before["issues_per_minute"]:
            said.append(
                f"throughput falls from {before['runners']} to {after['runners']} runners "
                f"({before['issues_per_minute']:.2f} → {after['issues_per_minute']:.2f} issues/min)"
            )
    return said


def misses(results: dict[str, Any]) -> list[str]:
    """The claims bar at every count."""
    return [
        f"{count} runners: {miss}"
        for count, result in results["runs"].items()
        for miss in bar({"claims": result})
    ]
