"""What one bench agent does in each scenario, whatever carries its requests.

Runs in the client processes, so it imports the standard library only: the HTTP
agent (``agent``) and the direct-SQL agent (``direct``) are two ``Driver``s of the
same loop, which is what makes their figures comparable.

One *op* per scenario:

- ``heartbeat``: one heartbeat of the agent's session;
- ``lease``: claim the agent's own issue, then release it;
- ``files``: claim the agent's own paths for its own issue, then release them;
- ``contended``: claim ``CONTENDED_PICK`` random paths of a shared pool; a refusal
  (409 ``file_conflict``) counts as ``conflict``; a claim that succeeds is released;
- ``directories``: over one shared tree, claim a directory (a module's, sometimes a
  whole package's) or ``DIRECTORY_FILES`` random files; they overlap whatever others
  hold under or above them: a refusal counts as ``conflict``, a success is released;
- ``live``: list the live sessions (first page and count);
- ``ready``: list the ready queue (first page and count).

Every request's outcome is a label: its HTTP status (``"200"``, ``"201"``),
``"conflict"`` for a file conflict, ``"409 <code>"`` for another refusal, or
``"error: ..."`` when no answer came. A label outside ``EXPECTED`` fails the run.
"""

from __future__ import annotations

import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

SCENARIOS = ("heartbeat", "lease", "files", "contended", "directories", "live", "ready")
CONTENDED_PICK = 10  # paths per contended claim, out of the shared pool
DIRECTORY_SHARE = 0.5  # of directories claims: one directory; the others, files
PACKAGE_SHARE = 0.1  # of those directories: a whole package rather than a module
DIRECTORY_FILES = 3  # files per directories claim that names files

# Request kinds per scenario, and the outcomes each may have without failing the run.
EXPECTED: dict[str, dict[str, frozenset[str]]] = {
    "heartbeat": {"heartbeat": frozenset({"200"})},
    "lease": {"claim": frozenset({"201"}), "release": frozenset({"200"})},
    "files": {"claim": frozenset({"201"}), "release": frozenset({"200"})},
    "contended": {"claim": frozenset({"201", "conflict"}), "release": frozenset({"200"})},
    "directories": {"claim": frozenset({"201", "conflict"}), "release": frozenset({"200"})},
    "live": {"list": frozenset({"200"})},
    "ready": {"list": frozenset({"200"})},
}

# How long an agent waits for the others to be ready before giving up.
BARRIER_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class AgentPlan:
    """One agent's part in one run: who it is and what it works on."""

    scenario: str
    index: int
    agent_name: str
    agent_id: int
    workspace_id: int
    issue_id: int
    # The agent's own paths (files), or the shared pool it picks from (contended; for
    # directories, the shared tree's directories, ending in "/", and files).
    paths: tuple[str, ...]
    seconds: float
    seed: int


class Driver(Protocol):
    """One agent's connection to Projektor: over HTTP, or straight to the database."""

    def open(self) -> None:
        """Connect and open the agent's session (not timed)."""

    def close(self) -> None:
        """End the session and disconnect (not timed)."""

    def heartbeat(self) -> str: ...

    def claim_issue(self) -> str: ...

    def release_issue(self) -> str: ...

    def claim_files(self, paths: list[str]) -> str: ...

    def release_files(self) -> str: ...

    def list_live_sessions(self) -> str: ...

    def list_ready_issues(self) -> str: ...

    def statements(self) -> int:
        """Statements sent to the database so far (direct only; 0 over HTTP)."""

    def reconnects(self) -> int:
        """Kept-alive connections found closed and opened again (HTTP only)."""


@dataclass
class AgentResult:
    """What one agent sends back to the command: raw latencies (seconds) and counts."""

    index: int
    started: float = 0.0  # time.monotonic(): one clock for every process of the host
    finished: float = 0.0
    ops: int = 0
    op_latencies: list[float] = field(default_factory=list)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    statements: dict[str, int] = field(default_factory=dict)  # per kind (direct only)
    reconnects: int = 0
    setup_error: str | None = None
    errors: list[str] = field(default_factory=list)  # the first few, for the report

    def timed(self, kind: str, call: Callable[[], str], driver: Driver) -> str:
        sent = driver.statements()
        started = time.perf_counter()
        outcome = call()
        self.latencies.setdefault(kind, []).append(time.perf_counter() - started)
        self.outcomes.setdefault(kind, Counter())[outcome] += 1
        self.statements[kind] = self.statements.get(kind, 0) + driver.statements() - sent
        if outcome.startswith("error") and len(self.errors) < 5:
            self.errors.append(f"{kind}: {outcome}")
        return outcome


def one_op(
    scenario: str, driver: Driver, plan: AgentPlan, rng: random.Random, result: AgentResult
) -> None:
    """Do one op of ``scenario``; a release follows only a claim that succeeded."""
    if scenario == "heartbeat":
        result.timed("heartbeat", driver.heartbeat, driver)
    elif scenario == "lease":
        if result.timed("claim", driver.claim_issue, driver) == "201":
            result.timed("release", driver.release_issue, driver)
    elif scenario in ("files", "contended", "directories"):
        paths = list(plan.paths)
        if scenario == "contended":
            paths = sorted(rng.sample(paths, CONTENDED_PICK))
        elif scenario == "directories":
            paths = directory_request(paths, rng)
        if result.timed("claim", lambda: driver.claim_files(paths), driver) == "201":
            result.timed("release", driver.release_files, driver)
    elif scenario == "live":
        result.timed("list", driver.list_live_sessions, driver)
    elif scenario == "ready":
        result.timed("list", driver.list_ready_issues, driver)
    else:
        raise ValueError(f"Unknown scenario {scenario!r}")


def directory_request(tree: list[str], rng: random.Random) -> list[str]:
    """One claim of ``directories``: a module's directory, now and then a package's
    (a directory two levels up holds the modules' directories), or a few files."""
    if rng.random() < DIRECTORY_SHARE:
        depth = 2 if rng.random() < PACKAGE_SHARE else 3  # "tree/pkgN/" or "tree/pkgN/modM/"
        return [
            rng.choice([path for path in tree if path.endswith("/") and path.count("/") == depth])
        ]
    return sorted(rng.sample([path for path in tree if not path.endswith("/")], DIRECTORY_FILES))


def run_agent(driver: Driver, plan: AgentPlan, barrier: Any, results: Any) -> None:
    """The body of one client process: set up, wait for the others, run until the
    deadline, send the figures back.

    ``barrier`` (a ``multiprocessing`` Barrier, the command included) starts every
    agent together; an agent that fails to set up aborts it so nobody waits.
    """
    result = AgentResult(index=plan.index)
    rng = random.Random(plan.seed)
    try:
        # The ceiling must not carry Django's weight, nor should the HTTP clients.
        if "django" in sys.modules:
            raise RuntimeError("a bench client process imported Django")
        driver.open()
        warm_up = AgentResult(index=plan.index)  # first requests pay for cold caches
        one_op(plan.scenario, driver, plan, rng, warm_up)
        barrier.wait(BARRIER_TIMEOUT_SECONDS)
    except Exception as error:  # noqa: BLE001 - reported to the command, which fails the run
        result.setup_error = f"{type(error).__name__}: {error}"
        barrier.abort()
        results.put(result)
        return
    result.started = time.monotonic()
    deadline = result.started + plan.seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        one_op(plan.scenario, driver, plan, rng, result)
        result.op_latencies.append(time.perf_counter() - started)
        result.ops += 1
    result.finished = time.monotonic()
    result.reconnects = driver.reconnects()
    try:
        driver.close()
    except Exception as error:  # noqa: BLE001 - the figures stand; say what went wrong
        result.errors.append(f"close: {error!r}")
    results.put(result)
