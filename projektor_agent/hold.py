"""``projektor hold NAME [--units N] [--wait S] [--issue I] -- COMMAND [ARG …]``: a
command run while a resource is held (docs/agents.md, "Holding a resource").

The hold is taken in ``PROJEKTOR_SESSION`` (inside a runner, which keeps that session
live), or else in a session of this command's own, which it heartbeats while the
command runs and ends at its exit. The command gets the hold's slots in its
environment (``PROJEKTOR_SLOTS``, ``PROJEKTOR_SLOT``) and runs in this process's
group, its standard streams this process's; the hold is released when it exits,
whatever the exit: the command failing, SIGTERM, SIGHUP or SIGINT to this process
(passed on to the command, which is killed after ``--grace`` seconds), the command
killed. A ^C at the terminal reaches the command itself, which decides.

Exit status: the command's (128 + N when it was killed by signal N); 1 when the
resource stayed busy (its holders named), 2 a usage error (a resource that does not
exist too), 3 the server unreachable. Killed with SIGKILL, it leaves its own session to
expire: its hold is taken back after the TTL by the next that needs its units.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import threading
from types import FrameType

from projektor_agent import commands, config, lifeline, resources
from projektor_agent.client import Client
from projektor_agent.errors import CommandError, UsageError
from projektor_agent.output import PROG, say, warn
from projektor_agent.supervise import Watch, resolved

DEFAULT_TTL = 120.0
CLEANUP_TIMEOUT = 10.0  # seconds, for each call of the release and the end
STOPS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
LOST_TYPES = "resource.released,session.ended"  # what says the hold is no longer ours


class Stopped(Exception):
    """This process was told to stop before the command started."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def main(args: argparse.Namespace) -> int:
    command = command_of(args)
    if not command:
        raise UsageError("no command: give it after --, e.g. projektor hold db:test -- make test")
    want = resources.Wanted(resources.checked_name(args.name), args.units)
    if want.units < 1:
        raise UsageError(f"--units is {want.units}: give at least 1")
    if args.wait < 0 or args.grace < 0:
        raise UsageError("--wait and --grace are seconds: give 0 or more")
    command = resolved(command, "the command", "nothing held")
    client = Client(config.load())
    issue = args.issue or os.environ.get("PROJEKTOR_ISSUE")
    session = args.session or os.environ.get("PROJEKTOR_SESSION")
    holding = Holding(
        client,
        want,
        command,
        issue=commands.number(issue, "issue", "PROJEKTOR_ISSUE") if issue else None,
        session=commands.number(session, "session", "PROJEKTOR_SESSION") if session else None,
        wait=float(args.wait),
        grace=float(args.grace),
    )
    return holding.main()


def command_of(args: argparse.Namespace) -> list[str]:
    """The command, after the first ``--`` of the command line (as typed: argparse
    reads ``--`` differently from one Python to the next); the words between ``hold``
    and it read again as NAME and options (``projektor hold db:test --wait 30 -- make
    test``). Without ``--``, the words after NAME."""
    words = list(getattr(args, "words", None) or [])
    if "hold" not in words or "--" not in words[words.index("hold") :]:
        rest = list(args.held_command)
        if rest and rest[0].startswith("-"):
            raise UsageError(f"{rest[0]}: give the options before --, and the command after it")
        return rest
    start = words.index("hold")  # the subcommand: the global options take no value
    cut = words.index("--", start)
    from projektor_agent.cli import hold_options

    again = argparse.ArgumentParser(prog=f"{PROG} hold", add_help=False)
    again.add_argument("--json", action="store_true")
    again.add_argument("name")
    hold_options(again)
    again.parse_args(words[start + 1 : cut], namespace=args)
    return words[cut + 1 :]


class Holding:
    """One hold, from its session to its release, and the command run while it lasts."""

    def __init__(
        self,
        client: Client,
        want: resources.Wanted,
        command: list[str],
        *,
        issue: int | None,
        session: int | None,
        wait: float,
        grace: float,
    ) -> None:
        self.client, self.want, self.command = client, want, command
        self.issue, self.session, self.wait, self.grace = issue, session, wait, grace
        self.own_session = session is None  # else the runner's, which it keeps live
        self.watch: Watch | None = None
        self.held: resources.Held | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.stops: list[int] = []  # the signals received, in order
        self.waiting = False  # in the acquire call, which a signal cuts short
        self.passed = False  # a stop was passed on to the command

    def main(self) -> int:
        previous = {sig: signal.signal(sig, self.handle) for sig in STOPS}
        try:
            return self.hold_and_run()
        except Stopped as stopped:
            say(f"{signal.Signals(stopped.signum).name}: stopped before the command started")
            return 128 + stopped.signum
        finally:
            for sig in STOPS:  # no signal cuts the cleanup short
                signal.signal(sig, signal.SIG_IGN)
            self.let_go()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def hold_and_run(self) -> int:
        session = self.session if self.session is not None else self.open_session()
        self.check()
        self.waiting = True
        try:
            self.held = resources.acquire(
                self.client, self.want, session=session, issue=self.issue, wait=self.wait
            )
        finally:
            self.waiting = False
        self.check()
        held = self.held
        said = "" if held.ours else " (this session held it already: it is not released here)"
        say(f"holding {held.describe()} (hold {held.hold.get('id')}, session {session}){said}")
        env = {**os.environ, **resources.environment([held])}
        try:
            self.process = subprocess.Popen(
                self.command, env=env, preexec_fn=lifeline.die_with_runner()
            )
        except OSError as error:
            raise UsageError(f"cannot run {self.command[0]!r}: {error.strerror or error}") from None
        if self.stops and not self.passed:  # one came while it started: it goes on to it
            self.pass_on(self.stops[0])
        status = self.process.wait()
        return status if status >= 0 else 128 - status

    def open_session(self) -> int:
        """A session of this command's own, heartbeaten (and watched: a hold taken from
        it, or its end, stops the command) until ``let_go``."""
        agent = commands.agent_of(self.client)
        self.check()
        opened = self.client.post("/sessions/", {"agent": agent})
        self.session = int(opened["id"])
        ttl = float(opened.get("ttl_seconds") or DEFAULT_TTL)
        self.watch = Watch(self.client, self.session, ttl, self.lost, types=LOST_TYPES)
        self.watch.start()
        return self.session

    # --- signals ----------------------------------------------------------------------------

    def check(self) -> None:
        if self.stops:
            raise Stopped(self.stops[0])

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """SIGTERM, SIGHUP, SIGINT: before the command, stop (at once in a wait); while
        it runs, pass it on (a second one kills it)."""
        self.stops.append(signum)
        if self.process is None:
            if self.waiting:
                self.waiting = False
                raise Stopped(signum)
            return
        if signum == signal.SIGINT and from_the_terminal():
            return  # the command, in the terminal's foreground group too, has it already
        if self.passed:
            say(f"{signal.Signals(signum).name} again: killing the command now")
            self.send(signal.SIGKILL)
            return
        self.pass_on(signum)

    def pass_on(self, signum: int) -> None:
        self.passed = True
        name = signal.Signals(signum).name
        say(f"{name}: passed to the command; the hold is released when it exits")
        self.send(signum)
        if signum != signal.SIGINT:  # an interrupt the command may handle as it likes
            self.kill_later()

    def lost(self, why: str) -> None:
        warn(f"{self.want.name}: the hold is no longer this command's: {why}; stopping it")
        self.stops.append(signal.SIGTERM)
        if self.process is not None and not self.passed:
            self.passed = True
            self.send(signal.SIGTERM)
            self.kill_later()

    def send(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                self.process.send_signal(signum)

    def kill_later(self) -> None:
        timer = threading.Timer(self.grace, self.send, args=(signal.SIGKILL,))
        timer.daemon = True
        timer.start()

    # --- the end -----------------------------------------------------------------------------

    def let_go(self) -> None:
        """The hold released (when this command took it), then its own session ended;
        each tried even if the one before failed."""
        if self.watch is not None:
            self.watch.close()  # our own release and end are no loss
        held, session = self.held, self.session
        if held is not None and held.ours and session is not None:
            try:
                if resources.release(self.client, held, session, timeout=CLEANUP_TIMEOUT):
                    say(f"released {self.want.name}")
                else:
                    warn(f"{self.want.name} was no longer held by this session")
            except CommandError as error:
                warn(f"could not release {self.want.name}: {error.message}")
        if self.own_session and session is not None:
            try:
                self.client.post(
                    f"/sessions/{session}/end/", idempotent=True, timeout=CLEANUP_TIMEOUT
                )
            except CommandError as error:
                warn(f"could not end session {session} (it expires after its TTL): {error.message}")


def from_the_terminal() -> bool:
    """A SIGINT most likely typed at the terminal: this process is in its foreground
    process group, which the command shares."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False
