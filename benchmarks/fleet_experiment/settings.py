"""The experiment's settings: its defaults and its --quick."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

CONDITIONS = ("coordinated", "uncoordinated")


@dataclass(frozen=True)
class Settings:
    runners: int = 4
    issues: int = 24
    seed: int = 1
    ttl: float = 8.0  # the server's session TTL: the long workers outlast it
    scan: float = 2.0  # the coordinated runners' --scan
    time_cap: float = 600.0  # per condition
    work_seconds: tuple[float, float] = (1.0, 3.0)
    crash_rate: float = 0.12
    # The agent CLI whose hooks the coordinated runners install (--hooks) and whose
    # payloads the scripted agent speaks to them (--harness): demo.workbench.speech.
    harness: str = "claude-code"


DEFAULT = Settings()
# Twelve issues: with fewer, a few seconds of noise decide the throughput ratio.
QUICK = Settings(runners=3, issues=12, ttl=6.0, time_cap=240.0, work_seconds=(0.5, 1.5))

Progress = Callable[[str], None]
