"""Does the fleet scale? (``bench_fleet --scaling 1,4,8,16``)

The claims and queue conditions at each runner count (``--condition`` chooses), over one
plan wide enough for the largest (``4 ×`` its runners issues at least: the same
generator, so the same ingredients, hot files, ``blocks`` links and crashes, only more
of them), each count on a fresh database, repository and gunicorn. Per condition and
count: issues per minute, the speed-up over its fewest runners, the CPU the runners
(their own, and their agents, hooks and git), the server and the machine spent over the
run, and the plan's critical path (its longest chain of ``blocks`` links, in seconds of
scripted work): a plan whose critical path is most of a run cannot go faster with more
runners. Issues per core-minute (issues done for each minute of CPU the runners and the
server spent) is the figure a machine with more cores multiplies. The claims condition
checks each landing again after its rebase, one at a time: the command runs the scaling
with a check of 0 seconds unless told otherwise (``--check-seconds``), so that the
runners, not the check, are measured.
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


SCALED = ("claims", "queue")  # the conditions that coordinate: the ones meant to scale


def run(
    settings: Settings,
    counts: list[int],
    databases: Databases,
    where: Path,
    progress: Progress,
    conditions: tuple[str, ...] = SCALED,
) -> dict[str, Any]:
    """Each condition at each count in turn (the databases' template already migrated)."""
    runs: dict[str, dict[int, dict[str, Any]]] = {name: {} for name in conditions}
    path: dict[str, Any] = {}
    for name in conditions:
        for count in counts:
            directory = where / f"{name}-{count}"
            directory.mkdir()
            at_count = replace(settings, runners=count)

            def said(message: str, label: str = f"{name}, {count} runners") -> None:
                progress(f"{label}: {message}")

            said(f"{settings.issues} issues")
            fresh = databases.fresh(f"scale_{name}_{count}")
            runs[name][count] = Condition(name, at_count, fresh, directory, said).run()
            if not path:
                path = critical_path(Plan.load(directory / "plan.json"))
    return {
        "plan": {"issues": settings.issues, "seed": settings.seed, "critical_path": path},
        "scaling": [row for name in conditions for row in rows(name, runs[name], path)],
        "runs": {name: {str(n): r for n, r in by_count.items()} for name, by_count in runs.items()},
    }


def rows(
    condition: str, runs: dict[int, dict[str, Any]], path: dict[str, Any]
) -> list[dict[str, Any]]:
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

        spent = (cpu["runners_seconds"] or 0) + (server or 0)
        table.append(
            {
                "condition": condition,
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
                "issues_per_core_minute": round(done * 60 / spent, 2) if spent else None,
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
    ("condition", lambda r: r["condition"]),
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
    ("issues per core-minute", lambda r: f"{r['issues_per_core_minute'] or 0:.1f}"),
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
    fewest = table[0]  # the first condition's fewest runners
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
        same = before["condition"] == after["condition"]
        if same and after["issues_per_minute"] < before["issues_per_minute"]:
            said.append(
                f"{after['condition']}: throughput falls from {before['runners']} to "
                f"{after['runners']} runners ({before['issues_per_minute']:.2f} → "
                f"{after['issues_per_minute']:.2f} issues/min)"
            )
    return said


def misses(results: dict[str, Any]) -> list[str]:
    """The coordinated bar at every count (0 conflicting integrations, 0 red landings,
    nothing done twice, no 5xx): throughput is said (``notes``), not failed."""
    return [
        f"{name}, {count} runners: {miss}"
        for name, by_count in results["runs"].items()
        for count, result in by_count.items()
        for miss in bar({name: result})
    ]
