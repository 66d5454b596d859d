"""The experiment's settings: its defaults and its --quick."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# Uncoordinated: no claims, each branch checked alone before it lands (the agent runs the
# check, as a pull request's CI); claims: edit-time claims, one landing at a time,
# checked again after its rebase; queue: claims, and the server's landing queue.
CONDITIONS = ("uncoordinated", "claims", "queue")


@dataclass(frozen=True)
class Settings:
    runners: int = 4
    # Enough that the plan's end (its last issues, waiting on one another's claims of a
    # hot file) is not most of a run that lands through the queue.
    issues: int = 32
    seed: int = 1
    ttl: float = 8.0  # the server's session TTL: the long workers outlast it
    scan: float = 2.0  # the claiming runners' --scan
    time_cap: float = 900.0  # per condition
    work_seconds: tuple[float, float] = (1.0, 3.0)
    crash_rate: float = 0.12
    # The agent CLI whose hooks the claiming runners install (--hooks) and whose
    # payloads the scripted agent speaks to them (--harness): demo.workbench.speech.
    harness: str = "claude-code"
    # How long the repository's check takes (its sleep: a slow suite, without the CPU).
    check_seconds: float = 10.0
    batch_max: int = 4  # the queue condition's --batch-max


DEFAULT = Settings()
# Twelve issues: with fewer, a few seconds of noise decide the throughput ratio.
QUICK = Settings(
    runners=3, issues=12, ttl=6.0, time_cap=240.0, work_seconds=(0.5, 1.5), check_seconds=2.0
)

Progress = Callable[[str], None]
