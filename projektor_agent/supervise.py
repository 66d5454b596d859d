"""While the agent works: its process (stderr tee'd and its tail kept), and the watch
that heartbeats its session and follows the session's events, so that a lease or
claims released to another stop the agent. At each heartbeat the watch also looks at
the worktree: when it changed since the last look, that is progress, and the session
says so (``/sessions/{id}/progress/``: an agent that heartbeats but changes nothing
is shown as stalled to people)."""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from projektor_agent import gitops, lifeline
from projektor_agent.client import Client
from projektor_agent.errors import CommandError, Unreachable, UsageError
from projektor_agent.output import say, warn

# Another session owns the work now (docs/agents.md, "The agent command"). ``released``
# (our own hand-in or give-back) and ``agent_ended`` (our own end) are not among them.
LOST_REASONS = ("expired", "overridden", "issue_closed", "max_age")
WATCHED_TYPES = "lease.released,claims.released,session.ended"
EVENT_WAIT_SECONDS = 25  # one long poll (the server allows 30)
TAIL_LINES = 30
KEPT_BYTES = 65536  # of a landing check's output
RETRY_SECONDS = 1.0  # between heartbeats while the server does not answer


class Watch:
    """Heartbeats every quarter TTL and follows the session's events, in two daemon
    threads, until closed. ``lost`` says why the work is no longer the session's."""

    def __init__(
        self,
        client: Client,
        session: int,
        ttl: float,
        on_lost: Callable[[str], None],
        workdir: Callable[[], Path | None] = lambda: None,
        types: str = WATCHED_TYPES,
    ) -> None:
        self.client, self.session, self.ttl = client, session, ttl
        self.types = types  # the events that may say the work is lost
        self.on_lost = on_lost
        self.workdir = workdir  # the worktree the agent works in, once there is one
        self.worktree_seen: str | None = None  # its state at the last look
        self.closed = threading.Event()
        self.lost: str | None = None
        self.cursor = 0  # the newest event id seen: a recent point to wait after
        self._lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self.heartbeats, name="heartbeat", daemon=True),
            threading.Thread(target=self.events, name="events", daemon=True),
        ]

    def start(self) -> Watch:
        for thread in self.threads:
            thread.start()
        return self

    def close(self) -> None:
        self.closed.set()  # the threads end at their next wake-up; nothing waits for them

    def lose(self, why: str) -> None:
        with self._lock:
            if self.lost is not None or self.closed.is_set():
                return
            self.lost = why
        self.on_lost(why)

    def heartbeats(self) -> None:
        period = max(self.ttl / 4, 0.2)
        last_answer = time.monotonic()
        failing = near_told = False
        while not self.closed.wait(RETRY_SECONDS if failing else period):
            try:
                self.client.post(
                    f"/sessions/{self.session}/heartbeat/",
                    retry=False,
                    timeout=max(min(self.ttl / 2, 10.0), 1.0),
                )
            except Unreachable as error:
                silent = time.monotonic() - last_answer
                if not failing:
                    warn(
                        f"cannot heartbeat ({error.message}); the agent keeps working and "
                        f"the heartbeat is retried until the session's TTL ({self.ttl:g} s) nears"
                    )
                elif silent > self.ttl * 0.75 and not near_told:
                    warn(
                        f"no heartbeat for {silent:.0f} s of the {self.ttl:g} s TTL: another "
                        "runner may reclaim this work; the agent is stopped if it does"
                    )
                    near_told = True
                failing = True
                continue
            except CommandError as error:
                if self.closed.is_set():
                    return
                if error.code == "session_ended":
                    self.lose("its session was ended")
                    return
                warn(f"heartbeat refused: {error.message}")
                continue
            if failing and not self.closed.is_set():
                say("the server answers again: heartbeats resumed")
            last_answer, failing, near_told = time.monotonic(), False, False
            self.progress_if_changed()

    def progress_if_changed(self) -> bool:
        """Report progress iff the worktree changed since the last look (the first look
        only notes where it starts). Progress is a signal: a failure is not reported."""
        where = self.workdir()
        if where is None:
            return False
        try:
            state = gitops.worktree_state(where)
        except (gitops.GitError, OSError, subprocess.SubprocessError):
            return False  # not made yet, or half made: the heartbeat thread must go on
        changed = self.worktree_seen is not None and state != self.worktree_seen
        self.worktree_seen = state
        if not changed:
            return False
        with contextlib.suppress(CommandError):  # Unreachable is one too
            self.client.post(
                f"/sessions/{self.session}/progress/",
                {"note": "the worktree changed"},
                retry=False,
                timeout=max(min(self.ttl / 2, 10.0), 1.0),
            )
        return True

    def events(self) -> None:
        query: dict[str, Any] = {
            "session": self.session,
            "type": self.types,
            "after": 0,
            "wait": EVENT_WAIT_SECONDS,
        }
        while not self.closed.is_set():
            try:
                page = self.client.get(
                    "/events/", query, retry=False, timeout=EVENT_WAIT_SECONDS + 20
                )
            except CommandError:
                self.closed.wait(RETRY_SECONDS)  # the heartbeat thread reports an outage
                continue
            for event in page.get("events", []):
                self.cursor = max(self.cursor, int(event.get("id", 0)))
                why = lost_because(event)
                if why:
                    self.lose(why)
            query["after"] = page.get("next", query["after"])


def lost_because(event: dict[str, Any]) -> str | None:
    data = event.get("data") or {}
    if event.get("type") == "session.ended":
        return "its session was ended"
    reason = data.get("reason")
    if reason not in LOST_REASONS:
        return None
    taker = actor_name(data.get("by") or {})
    what = {
        "lease.released": "lease",
        "resource.released": f"hold of {data.get('resource')}",
    }.get(str(event.get("type")), "file claims")
    return f"its {what} went to another session: released {reason}" + (
        f" by {taker}" if taker else ""
    )


def actor_name(by: dict[str, Any]) -> str:
    """Who took the work, by name: an operator, an agent (with its session), a key;
    empty when the event does not say."""
    if by.get("operator"):
        return f"operator {by['operator']}"
    if by.get("agent"):
        session = f" (session {by['session']})" if by.get("session") else ""
        return f"agent {by['agent']}{session}"
    if by.get("key"):
        return f"key {by['key']}"
    return f"session {by['session']}" if by.get("session") else ""


class Child:
    """The agent's process, in its own process group (so its children are signalled
    with it); stdout passes through, stderr is copied through and its tail kept. With
    ``capture`` (a landing check): stdout and stderr are kept, the end of them in
    ``output``, and nothing is copied through."""

    def __init__(
        self, command: list[str], cwd: str, env: dict[str, str], *, capture: bool = False
    ) -> None:
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.capture = capture
        self.kept = bytearray()  # with capture: the end of what it printed
        self.signalled: int | None = None  # the signal the runner sent, if any
        # It dies with the runner: invariant 19 (A runner's child never outlives its
        # runner's right to work).
        self.watchdog = lifeline.Watchdog()
        try:
            self.process = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if capture else None,
                stderr=subprocess.STDOUT if capture else subprocess.PIPE,
                start_new_session=True,  # it leads its own process group
                preexec_fn=lifeline.die_with_runner(),
            )
        except BaseException:
            self.watchdog.release()
            raise
        self.watchdog.guard(self.process.pid)
        copy = self._keep_output if capture else self._copy_stderr
        self.reader = threading.Thread(target=copy, daemon=True)
        self.reader.start()

    @property
    def role(self) -> str:
        return "the landing check" if self.capture else "the agent"

    @property
    def output(self) -> str:
        return self.kept.decode("utf-8", "replace")

    def _keep_output(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        for raw in iter(lambda: os.read(stream.fileno(), 65536), b""):
            self.kept += raw
            del self.kept[:-KEPT_BYTES]

    def _copy_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        for raw in iter(stream.readline, b""):
            sys.stderr.buffer.write(raw)
            sys.stderr.buffer.flush()
            self.tail.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def wait(self) -> int:
        status = self.process.wait()
        self.watchdog.release()
        self.reader.join(timeout=5)
        return status

    def send(self, signum: int) -> None:
        if self.signalled is None or signum == signal.SIGKILL:
            self.signalled = signum
        with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
            os.killpg(self.process.pid, signum)

    def stop(self, grace: float) -> None:
        """SIGTERM now, SIGKILL after ``grace`` seconds if it still lives."""
        self.send(signal.SIGTERM)
        self.stop_later(grace)

    def stop_later(self, grace: float) -> None:
        timer = threading.Timer(grace, self._kill_if_alive)
        timer.daemon = True
        timer.start()

    def _kill_if_alive(self) -> None:
        if self.process.poll() is None:
            self.send(signal.SIGKILL)


def resolved(command: list[str], what: str, nothing: str) -> list[str]:
    """``command`` with its program checked: a path (made absolute, since the command may
    run in another directory, a worktree) to an executable file, or a name found on
    PATH. A usage error naming it (``what``, then ``nothing``: what was not done)
    otherwise."""
    program = command[0]
    if "/" not in program and not (os.altsep and os.altsep in program):
        if shutil.which(program) is None:
            raise UsageError(f"{what} {program!r} is not found on PATH: {nothing}")
        return command
    path = Path(program).expanduser().absolute()
    if not path.is_file():
        raise UsageError(f"{what} {program!r} does not exist ({path}): {nothing}")
    if not os.access(path, os.X_OK):
        raise UsageError(f"{what} {program!r} is not executable (chmod +x {path}): {nothing}")
    return [str(path), *command[1:]]


def exit_description(status: int) -> str:
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"was killed by {name}"
    return f"exited with status {status}"
