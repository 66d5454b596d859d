"""The fleet's runners: ``projektor run --loop`` processes with the scripted agent,
each in a process group of its own, and their stop.

Each lands its issues through its project's landing queue (``--integrate --queue``)
and tests the queue's batches with the demo repository's check (``--verify``, see
``verify_command``), so ``main`` only moves to a tree that passed it.

A runner starts its agent in a process group of the agent's own, so stopping a
runner's group does not reach its agent: the stop notes the groups under each runner,
sends SIGTERM to each runner (it passes it on to its agent, gives the work back and
exits), waits, then SIGKILLs the runners left and the groups it noted, so nothing
outlives the fleet.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from demo.fleet.place import CHECK, Place, git

PROC = Path("/proc")
RESTART_AFTER_SECONDS = 5.0  # a runner that exited comes back, not at once
BATCH_MAX = 4  # entries a runner tests in one batch of its project's landing queue


def verify_command() -> str:
    """The landing check, run by the shell in a tester's worktree (the repository's
    root): the demo repository's ``check.py``, with this interpreter."""
    return f"{shlex.quote(sys.executable)} {CHECK}"


@dataclass
class RunnerSpec:
    url: str
    key: str
    place: Place
    agent_args: Sequence[str] = ()  # after ``python -m demo.workbench.agent``
    runner_args: Sequence[str] = ()  # before ``--``
    env: dict[str, str] = field(default_factory=dict)


def runner_command(spec: RunnerSpec, project: str | None) -> list[str]:
    return [
        sys.executable,
        "-m",
        "projektor_agent",
        "run",
        "--loop",
        "--worktrees",
        str(spec.place.worktrees),
        "--integrate",
        "--queue",
        "--verify",
        verify_command(),
        "--batch-max",
        str(BATCH_MAX),
        "--hooks",
        "claude-code",
        *(["--project", project] if project else []),
        *spec.runner_args,
        "--",
        sys.executable,
        "-m",
        "demo.workbench.agent",
        *spec.agent_args,
    ]


@dataclass
class Runner:
    name: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    started: float
    exited_at: float | None = None


class Runners:
    """One runner per agent, each on its home project's queue (a project at its WIP
    limit holds up only its own runners), restarted a few seconds after it exits."""

    def __init__(
        self, spec: RunnerSpec, homes: dict[str, str | None], say: Callable[[str, int], None]
    ) -> None:
        self.spec, self.homes, self.say = spec, dict(homes), say
        self.running: dict[str, Runner] = {}
        self.restarts = 0

    def environment(self, name: str) -> dict[str, str]:
        interpreter = str(Path(sys.executable).parent)
        return {
            **os.environ,
            **self.spec.env,
            "PROJEKTOR_URL": self.spec.url,
            "PROJEKTOR_API_KEY": self.spec.key,
            "PROJEKTOR_AGENT": name,
            # The agent calls ``projektor hook``: the checkout's console script first.
            "PATH": interpreter + os.pathsep + os.environ.get("PATH", ""),
            "PYTHONPATH": os.pathsep.join(
                filter(None, [package_root(), os.environ.get("PYTHONPATH")])
            ),
            "PYTHONUNBUFFERED": "1",
        }

    def start(self, name: str) -> None:
        tidy(self.spec.place.worktrees / name, say=lambda text: self.say(f"{name:<8} {text}", 1))
        log = (self.spec.place.logs / f"{name}.log").open("ab")
        process = subprocess.Popen(
            runner_command(self.spec, self.homes[name]),
            cwd=self.spec.place.repo,
            env=self.environment(name),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the fleet, which stops them in order
        )
        self.running[name] = Runner(name, process, log, time.monotonic())
        self.say(f"{name:<8} runner started on {self.homes[name]} (pid {process.pid})", 2)

    def start_all(self) -> None:
        for name in self.homes:
            self.start(name)

    def tend(self) -> None:
        """Restart a runner a while after it exited."""
        now = time.monotonic()
        for runner in list(self.running.values()):
            status = runner.process.poll()
            if status is None:
                continue
            if runner.exited_at is None:
                runner.exited_at = now
                runner.log.close()
                self.say(f"{runner.name:<8} runner exited with status {status}", 1)
            elif now - runner.exited_at >= RESTART_AFTER_SECONDS:
                self.restarts += 1
                self.start(runner.name)

    def alive(self) -> int:
        return sum(runner.process.poll() is None for runner in self.running.values())

    def pids(self) -> list[int]:
        return [runner.process.pid for runner in self.running.values()]

    def stop(self, grace: float) -> None:
        """SIGTERM to each runner; after ``grace`` seconds, SIGKILL to the runners left
        and to every process group that was under a runner when the stop began (its
        agent's, which outlives a killed runner)."""
        groups: set[int] = set()
        for runner in self.running.values():
            if runner.process.poll() is None:
                groups.update(groups_under(runner.process.pid))
                with suppress(ProcessLookupError):
                    runner.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for runner in self.running.values():
            with suppress(subprocess.TimeoutExpired):
                runner.process.wait(max(0.0, deadline - time.monotonic()))
        groups.update(r.process.pid for r in self.running.values() if r.process.poll() is None)
        for group in sorted(groups):
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        for runner in self.running.values():
            runner.process.wait()
            if not runner.log.closed:
                runner.log.close()


def tidy(worktree: Path, say: Callable[[str], None]) -> None:
    """A worktree a runner killed at the last stop left mid-rebase or with uncommitted
    edits: the rebase undone, the edits committed on its branch, so that the runner
    (which never discards work) can take new work there."""
    if not (worktree / ".git").exists():
        return
    for state in ("rebase-merge", "rebase-apply"):
        where = place_git(worktree, "rev-parse", "--git-path", state)
        if where and (worktree / where).exists():
            place_git(worktree, "rebase", "--abort")
    if place_git(worktree, "status", "--porcelain"):
        place_git(worktree, "add", "-A")
        place_git(
            worktree, "commit", "--quiet", "--no-verify", "-m",
            "Unfinished work left when the demo fleet last stopped",
        )  # fmt: skip
        say(f"committed the unfinished work left in {worktree} on its branch")


def place_git(worktree: Path, *args: str) -> str:
    """git in the worktree; its output, or "" when it failed (tidying is best effort)."""
    try:
        return git(worktree, *args).strip()
    except RuntimeError:
        return ""


def package_root() -> str:
    """The directory ``demo`` and ``projektor_agent`` are imported from."""
    import demo

    return str(Path(demo.__file__).resolve().parent.parent)


def groups_under(pid: int) -> set[int]:
    """The process groups of ``pid``'s live descendants (Linux's /proc; none elsewhere)."""
    parents: dict[int, tuple[int, int]] = {}  # pid -> (parent, group)
    for stat in PROC.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while we looked
        if fields[0] not in ("Z", "X"):
            parents[int(stat.parent.name)] = (int(fields[1]), int(fields[2]))
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        children = {child for child, (parent, _) in parents.items() if parent in frontier}
        found.update(parents[child][1] for child in children)
        frontier = children
    return found
