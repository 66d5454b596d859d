"""What ``projektor run`` hands down to the work of one unit: the settings it was given,
the agent's process and the signals, the event cursor. The runner makes them; the
unit, its scan, its checkout and its integration read them, and never the runner."""

from __future__ import annotations

import argparse
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from projektor_agent import harnesses
from projektor_agent.client import Client
from projektor_agent.errors import UsageError
from projektor_agent.output import say
from projektor_agent.resources import Held, Wanted, wanted
from projektor_agent.supervise import Child

CATCH_UP_LIMIT = 1000
SKIPPED = -1  # a unit not worked on: with --next, take other work


class Interrupted(Exception):
    """The runner was told to stop (SIGINT or SIGTERM) while no agent was running."""


class SetupError(UsageError):
    """The unit's local setup failed (its worktree, its files); the issue was given
    back. With --loop the runner goes on with other work; without, exit 2."""


@dataclass(frozen=True)
class Options:
    """The options of ``projektor run`` (cli.add_run), typed."""

    issue: int | None
    next: bool
    project: str | None
    paths: list[str] | None
    loop: bool
    worktrees: str | None
    verify: str | None
    hooks: tuple[str, ...]  # the agent CLIs whose hooks are installed (harnesses)
    integrate: bool
    scan: float
    on_conflict: str  # wait | fail
    grace: float
    json: bool
    holds: tuple[Wanted, ...] = ()  # --hold, in name order
    hold_wait: float = 60.0  # --hold-wait
    queue: bool = False  # --queue: land through the project's landing queue
    batch_max: int = 4  # --batch-max: the largest batch this runner tests

    @classmethod
    def parsed(cls, args: argparse.Namespace) -> Options:
        return cls(
            issue=args.issue,
            next=bool(args.next or args.loop),  # --loop takes the next, one after another
            project=args.project,
            paths=args.paths,
            loop=bool(args.loop),
            worktrees=args.worktrees,
            verify=args.verify,
            hooks=harnesses.chosen(args.hooks, list(args.agent_command)),
            integrate=bool(args.integrate),
            scan=float(args.scan),
            on_conflict=args.on_conflict,
            grace=float(args.grace),
            json=bool(args.json),
            holds=wanted(args.hold),
            hold_wait=float(args.hold_wait),
            queue=bool(args.queue),
            batch_max=int(args.batch_max),
        )


@dataclass
class Unit:
    """One started issue: its session and lease, then its run, worktree and branch."""

    issue: dict[str, Any]
    session: int
    fence: int | None
    ttl: float
    run: dict[str, Any] | None = None
    workdir: Path | None = None
    base: str | None = None  # what the agent's commits are counted from
    branch: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    holds: list[Held] = field(default_factory=list)  # the resources held for it (--hold)
    hooks_added: list[str] = field(default_factory=list)  # to take out at the end (checkout)

    @property
    def id(self) -> int:
        return int(self.issue["id"])


class Signals:
    """SIGINT and SIGTERM, and the agent's process they go to: the first is passed to
    the agent (or stops the runner when none runs), the second kills the agent."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.interrupts = 0
        self.waiting = False  # in a long poll or a pause, which a signal cuts short
        self.child: Child | None = None
        self.child_lock = threading.Lock()

    @property
    def interrupted(self) -> bool:
        return self.interrupts > 0

    def check(self) -> None:
        if self.interrupted:
            raise Interrupted()

    def pause(self, seconds: float) -> None:
        """Wait ``seconds``; a signal ends the pause at once (Interrupted)."""
        self.waiting = True
        try:
            threading.Event().wait(seconds)
        finally:
            self.waiting = False
        self.check()

    def spawn(
        self, command: list[str], cwd: str, env: dict[str, str], *, capture: bool = False
    ) -> Child:
        child = Child(command, cwd, env, capture=capture)
        with self.child_lock:
            self.child = child
        if self.interrupted:  # a signal came while it started: the agent stops too
            child.stop(self.grace)
        return child

    def supervise(self, child: Child) -> int:
        try:
            return child.wait()
        finally:
            with self.child_lock:
                self.child = None

    def stop_child(self) -> None:
        with self.child_lock:
            if self.child is not None:
                self.child.stop(self.grace)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The handler of SIGINT and SIGTERM."""
        self.interrupts += 1
        name = signal.Signals(signum).name
        # Read without the lock: the handler runs in the main thread, which may hold it
        # (starting the agent), and waiting for it there would never end.
        child = self.child
        if child is None:
            if self.interrupts == 1:
                say(f"{name}: stopping")
            if self.waiting:  # a long poll: leave it now; elsewhere the next check stops
                self.waiting = False
                raise Interrupted()
            return
        if self.interrupts == 1:
            after = "its batch is returned" if child.capture else "it is given back"
            say(f"{name}: passed to {child.role}; {after} when it exits ({name} again: now)")
            child.send(signum)
            child.stop_later(self.grace)
        else:
            say(f"{name} again: stopping {child.role} now")
            child.send(signal.SIGKILL)


class Events:
    """The newest event seen of the workspace, and the long poll for the next ones."""

    def __init__(self, client: Client, signals: Signals) -> None:
        self.client, self.signals = client, signals
        self.cursor = 0  # the newest event id seen
        self.caught_up = False  # by catch_up, even when no event was found

    def saw(self, cursor: int) -> None:
        self.cursor = max(self.cursor, cursor)

    def wait(self, types: str, seconds: float, project: str | None = None) -> None:
        """Until an event of ``types`` (of ``project``) after the newest one seen, or
        ``seconds``: a long poll, never a sleep loop. Interrupted by SIGINT/SIGTERM."""
        self.signals.check()
        self.signals.waiting = True
        try:
            if not self.cursor and not self.caught_up:
                self.catch_up(types, project)
            wait = int(max(1, min(seconds, 30)))
            query = {"after": self.cursor, "type": types, "wait": wait, "project": project}
            page = self.client.get("/events/", query, timeout=wait + 20)
        finally:
            self.signals.waiting = False
        self.saw(int(page.get("next") or 0))
        self.signals.check()

    def catch_up(self, types: str, project: str | None = None) -> None:
        """Move the cursor to the newest event of ``types`` (once, at the start)."""
        while True:
            query = {"after": self.cursor, "type": types, "limit": CATCH_UP_LIMIT}
            query["project"] = project
            page = self.client.get("/events/", query)
            self.saw(int(page.get("next") or 0))
            if len(page.get("events", [])) < CATCH_UP_LIMIT:
                self.caught_up = True
                return


@dataclass
class BatchSize:
    """A tester's batch size: one more after a green batch, half after a red one,
    between 1 and ``most`` (--batch-max)."""

    most: int
    now: int = 0

    def __post_init__(self) -> None:
        self.now = self.now or self.most

    def green(self) -> None:
        self.now = min(self.most, self.now + 1)

    def red(self) -> None:
        self.now = max(1, self.now // 2)


@dataclass(frozen=True)
class RunContext:
    """Everything a unit reads of its runner, made once the agent and its worktrees
    are known."""

    client: Client
    agent: str
    command: list[str]  # the agent command, its placeholders not yet filled in
    options: Options
    repo: Path | None  # the repository the worktrees are made from (--worktrees)
    worktrees: Path | None  # where the agents' worktrees are (--worktrees)
    signals: Signals
    events: Events
    batch: BatchSize = field(default_factory=lambda: BatchSize(4))  # --queue's tester
