"""The table both conditions are printed in, and the bar they are held to."""

from __future__ import annotations

from typing import Any

from benchmarks.fleet_experiment.settings import CONDITIONS

# Coordination may cost some throughput, not more than this share of it.
THROUGHPUT_FLOOR = 0.8

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
    if "coordinated" in results:
        harness = results["coordinated"]["settings"].get("harness", "claude-code")
        lines.append(f"\nThe coordinated agents spoke to the {harness} hooks (--harness).")
    if len(names) == 2:
        coordinated, uncoordinated = (results[n]["issues_per_minute"] for n in CONDITIONS)
        ratio = coordinated / uncoordinated if uncoordinated else float("inf")
        lines.append(f"\nThroughput, coordinated ÷ uncoordinated: {ratio:.2f}")
    for name in names:
        for conflict in results[name]["conflicts"]:
            lines.append(f"{name}: issue W{conflict['issue']} conflicted: {conflict['reason']}")
    return "\n".join(lines)


def bar(results: dict[str, dict[str, Any]]) -> list[str]:
    """What the coordinated condition must show; each miss, said."""
    misses = []
    for name, result in results.items():
        if result["server_errors"] or result["client_5xx"]:
            misses.append(f"{name}: {result['server_errors']} 5xx answered")
    coordinated = results.get("coordinated")
    if coordinated is not None:
        if coordinated["conflicting_integrations"]:
            misses.append(
                f"coordinated: {coordinated['conflicting_integrations']} conflicting integrations"
            )
        if coordinated["done_twice"]:
            misses.append(f"coordinated: issues done twice {coordinated['done_twice_issues']}")
        if coordinated["crashed_taken_over"] < coordinated["crashes"]:
            misses.append("coordinated: a crashed agent's issue was not finished")
        elif coordinated["crashed_taken_over_by_another_runner"] < coordinated["crashes"]:
            misses.append("coordinated: a crashed agent's issue was finished by its own runner")
        if coordinated["issues_done"] < coordinated["issues"]:
            misses.append(f"coordinated: {coordinated['issues_done']}/{coordinated['issues']} done")
    uncoordinated = results.get("uncoordinated")
    if coordinated is not None and uncoordinated is not None:
        floor = THROUGHPUT_FLOOR * uncoordinated["issues_per_minute"]
        if coordinated["issues_per_minute"] < floor:
            misses.append(
                f"coordinated: {coordinated['issues_per_minute']:.2f} issues per minute, under "
                f"{THROUGHPUT_FLOOR:g} × the uncoordinated {uncoordinated['issues_per_minute']:.2f}"
            )
    return misses
