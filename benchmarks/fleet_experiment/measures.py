"""What a condition's records say: crashes, conflicts, the agents' notes, the log."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PROC_STAT = Path("/proc/stat")
GIVE_BACK = re.compile(r"projektor run: agent (?P<agent>\S+) gave issue (?P<issue>\d+) back: ")
# A rebase that cannot be made clean: at the landing, or when a claim needed a fresh base.
CONFLICTED = re.compile(r"conflict|cannot be rebased", re.IGNORECASE)
PLANNED_CRASH = "crashing as planned"  # the agent's last words, in the give-back's stderr tail
# A check that failed before the work landed: the runner's --verify (after a rebase), the
# landing queue's rejection ("check failed", found by bisection), or, in the give-back's
# stderr tail, the agent's own check (its --check, as a pull request's CI).
CHECK_FAILED = re.compile(r"verification failed|check failed", re.IGNORECASE)
AGENT_CHECK_FAILED = "workbench agent: the check failed"
CLOCK_SLACK = 1.0  # the server's timestamps and the agent's clock: one machine, rounding
CRASHED = re.compile(r"the agent (exited with status [1-9]\d*|was killed by SIG\w+)")


@dataclass
class Runner:
    agent: str
    process: subprocess.Popen[bytes]
    err: Path


def crash_record(
    key: int, agent: str, message: dict[str, Any], leases: list[dict[str, Any]], status: str
) -> dict[str, Any]:
    """When the crashed work was given back, and who took it next, how much later."""
    at = parse_time(message["created_at"])
    later = [lease for lease in leases if parse_time(lease["acquired_at"]) >= at]
    taken = later[0] if later else None
    waited = (parse_time(taken["acquired_at"]) - at).total_seconds() if taken else None
    how = CRASHED.search(message["body"])
    return {
        "issue": key,
        "agent": agent,
        "how": how.group(1) if how else "",
        "taken_by": taken["agent"] if taken else None,
        "waited_seconds": round(waited, 2) if waited is not None else None,
        "finished": status == "done",
    }


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def ready_times(plan_path: Path) -> dict[int, list[float]]:
    """When each issue's work was ready to land (its agent's exit 0), per attempt: what
    the scripted agent notes in ``PLAN.ready/<key>.<attempt>``."""
    where = plan_path.with_name(plan_path.name + ".ready")
    times: dict[int, list[float]] = {}
    for note in sorted(where.glob("*.*")) if where.is_dir() else []:
        key = note.name.split(".", 1)[0]
        if key.isdigit():
            times.setdefault(int(key), []).append(float(note.read_text().strip()))
    return {key: sorted(values) for key, values in times.items()}


def landing_waits(ready: dict[int, list[float]], landed: dict[int, float]) -> dict[int, float]:
    """Per issue landed, the seconds from its landed work's being ready (the last exit 0
    of its agent before the landing) to the landing."""
    waits: dict[int, float] = {}
    for key, at in landed.items():
        before = [moment for moment in ready.get(key, []) if moment <= at + CLOCK_SLACK]
        if before:
            waits[key] = round(max(0.0, at - before[-1]), 2)
    return waits


def agent_notes(runners: list[Runner]) -> dict[str, int]:
    """What the agents said of refused edits (their stderr passes through the runner's),
    and the runners of refused starts and landings that waited."""
    text = "".join(runner.err.read_text(errors="replace") for runner in runners)
    return {
        "refused": text.count("workbench agent: the hook refused"),
        "moved": len(re.findall(r"workbench agent: .* instead$", text, re.MULTILINE)),
        "left": text.count("is someone else's: left alone"),
        # The runners' own: a start the server refused (the issue leased, or its declared
        # files claimed, since the queue was read), and a landing that waited its turn
        # for the primary worktree.
        "starts_refused": text.count(" was taken first ("),
        "landing_waits": text.count("its worktree is busy"),
    }


def log_errors(log: Path) -> int:
    """Tracebacks in the server's log (a 5xx the metrics might not see: a worker killed)."""
    try:
        return log.read_text(errors="replace").count("Traceback (most recent call last)")
    except OSError:
        return 0


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


# --- the CPU a condition spent (Linux /proc; elsewhere every figure is 0) ---------------------


def runner_cpu_seconds(pid: int) -> tuple[float, float]:
    """A runner's own CPU (its Python process: heartbeats, event follow, scans, calls)
    and its waited-for children's (its agents, the hooks they ran, git): (own, children)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0, 0.0
    own = int(fields[11]) + int(fields[12])  # utime, stime
    children = int(fields[13]) + int(fields[14])  # cutime, cstime
    return own / CLOCK_TICKS, children / CLOCK_TICKS


def machine_ticks() -> tuple[int, int]:
    """The machine's CPU so far, every core: (busy, total) jiffies from /proc/stat
    (idle and iowait are not busy)."""
    try:
        line = PROC_STAT.read_text().splitlines()[0]
    except (OSError, IndexError):
        return 0, 0
    values = [int(value) for value in line.split()[1:]]
    total = sum(values[:8])  # user nice system idle iowait irq softirq steal
    return total - values[3] - values[4], total
