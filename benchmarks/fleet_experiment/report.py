"""The table the conditions are printed in, and the bar they are held to."""

from __future__ import annotations

from typing import Any

from benchmarks.fleet_experiment.settings import CONDITIONS

# The queue's batches against one landing at a time, with a slow check and enough runners
# to fill them: the published run (--runners 6 and the default check).
QUEUE_SPEEDUP = 1.5
SPEEDUP_RUNNERS = 6
SPEEDUP_CHECK_SECONDS = 10.0
CLAIMING = ("claims", "queue")

ROWS = [
    ("issues done", lambda r: f"{r['issues_done']}/{r['issues']}"),
    (
        "integrations (landed + conflicted)",
        lambda r: f"{r['integrations']} ({r['landed']} + {r['conflicting_integrations']})",
    ),
    (
        "conflicting integrations",
        lambda r: f"{r['conflicting_integrations']} ({r['conflict_rate']:.0%})",
    ),
    (
        "files in conflicts",
        lambda r: ", ".join(f"{p} ×{n}" for p, n in r["conflict_files"].items()) or "none",
    ),
    (
        "red landings (commits on main failing the check)",
        lambda r: f"{r['red_landings']} ({r['red_breaking']} breaking it)",
    ),
    (
        "semantic conflicts caught before landing",
        lambda r: (
            f"{r['semantic_conflicts_caught']} ({r['semantic_pairs']} "
            f"pair{'' if r['semantic_pairs'] == 1 else 's'} planned)"
        ),
    ),
    (
        "landing wait p50 / p95",
        lambda r: f"{r['landing_wait_p50_seconds']:.1f} / {r['landing_wait_p95_seconds']:.1f} s",
    ),
    ("landing queue: batches; rejected", lambda r: queue_cell(r)),
    ("work done twice", lambda r: str(r["done_twice"])),
    ("wall time", lambda r: f"{r['wall_seconds']:.0f} s"),
    ("issues per minute", lambda r: f"{r['issues_per_minute']:.2f}"),
    ("agent crashes", lambda r: str(r["crashes"])),
    (
        "crashed issues finished",
        lambda r: (
            f"{r['crashed_taken_over']}"
            f" ({r['crashed_taken_over_by_another_runner']} by another runner)"
        ),
    ),
    (
        "crashed work waited (max)",
        lambda r: (
            "-" if r["crash_wait_seconds_max"] is None else f"{r['crash_wait_seconds_max']:.1f} s"
        ),
    ),
    (
        "edits refused at edit time",
        lambda r: f"{r['edits_refused']} ({r['edits_moved']} moved, {r['edits_left']} left)",
    ),
    (
        "runners lost (died, or hung at the stop)",
        lambda r: str(sum(1 for status in r["runner_exits"].values() if status != 0)),
    ),
    ("server 5xx", lambda r: str(r["server_errors"])),
]


def queue_cell(result: dict[str, Any]) -> str:
    if result["condition"] != "queue":
        return "-"
    rejected = ", ".join(f"{n} {why}" for why, n in sorted(result["queue_rejections"].items()))
    return f"{result['queue_batches']}; {rejected or 'none'}"


def render(results: dict[str, dict[str, Any]]) -> str:
    names = [name for name in CONDITIONS if name in results]
    width = max(len(label) for label, _ in ROWS)
    cells = {name: [cell(results[name]) for _, cell in ROWS] for name in names}
    widths = {name: max(len(name), *(len(c) for c in cells[name])) for name in names}
    lines = ["| " + " | ".join([" " * width, *(name.ljust(widths[name]) for name in names)]) + " |"]
    lines.append("|" + "|".join(["-" * (width + 2), *("-" * (widths[n] + 2) for n in names)]) + "|")
    for row, (label, _) in enumerate(ROWS):
        values = [cells[name][row].ljust(widths[name]) for name in names]
        lines.append("| " + " | ".join([label.ljust(width), *values]) + " |")
    claims = next((results[n] for n in CLAIMING if n in results), None)
    if claims is not None:
        harness = claims["settings"].get("harness", "claude-code")
        lines.append(f"\nThe claiming agents spoke to the {harness} hooks (--harness).")
    any_result = next(iter(results.values()), None)
    if any_result is not None:
        check = any_result["settings"].get("check_seconds")
        lines.append(f"The check took {check:g} s (--check-seconds) plus its imports.")
    for over, under in (("queue", "claims"), ("claims", "uncoordinated")):
        if over in results and under in results:
            rate = results[under]["issues_per_minute"]
            ratio = results[over]["issues_per_minute"] / rate if rate else float("inf")
            lines.append(f"Throughput, {over} ÷ {under}: {ratio:.2f}")
    for name in names:
        for conflict in results[name]["conflicts"]:
            lines.append(f"{name}: issue W{conflict['issue']} conflicted: {conflict['reason']}")
        for red in results[name]["red_commits"]:
            if red["new"]:
                broke = f"{red['commit']} {red['subject']} broke main: {red['new'][0]}"
                lines.append(f"{name}: {broke}")
    return "\n".join(lines)


def bar(results: dict[str, dict[str, Any]]) -> list[str]:
    """What the conditions must show; each miss, said."""
    misses = []
    for name, result in results.items():
        if result["server_errors"] or result["client_5xx"]:
            misses.append(f"{name}: {result['server_errors']} 5xx answered")
        if result["done_twice"]:
            misses.append(f"{name}: issues done twice {result['done_twice_issues']}")
        lost = sorted(agent for agent, status in result["runner_exits"].items() if status != 0)
        if lost:
            misses.append(f"{name}: runners lost (died, or hung at the stop): {', '.join(lost)}")
    for name in CLAIMING:
        if name not in results:
            continue
        result = results[name]
        if result["conflicting_integrations"]:
            misses.append(f"{name}: {result['conflicting_integrations']} conflicting integrations")
        if result["red_landings"]:
            misses.append(f"{name}: {result['red_landings']} red landings")
        if result["crashed_taken_over"] < result["crashes"]:
            misses.append(f"{name}: a crashed agent's issue was not finished")
        if result["issues_done"] < result["issues"]:
            misses.append(f"{name}: {result['issues_done']}/{result['issues']} done")
    uncoordinated = results.get("uncoordinated")
    if uncoordinated is not None and not uncoordinated["red_landings"]:
        misses.append(
            "uncoordinated: no red landing (the semantic pairs never landed apart: nothing shown)"
        )
    claims, queue = results.get("claims"), results.get("queue")
    if claims is not None and queue is not None and speedup_applies(queue):
        floor = QUEUE_SPEEDUP * claims["issues_per_minute"]
        if queue["issues_per_minute"] < floor:
            misses.append(
                f"queue: {queue['issues_per_minute']:.2f} issues per minute, under "
                f"{QUEUE_SPEEDUP:g} × the claims condition's {claims['issues_per_minute']:.2f}"
            )
    return misses


def speedup_applies(result: dict[str, Any]) -> bool:
    """The queue's speed-up is held to at the published run's size (enough runners to
    fill its batches, the default check); smaller runs print it."""
    settings = result["settings"]
    return (
        settings["runners"] >= SPEEDUP_RUNNERS
        and settings.get("check_seconds", 0) >= SPEEDUP_CHECK_SECONDS
    )
