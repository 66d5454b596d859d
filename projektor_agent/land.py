"""``projektor land``: a landing worker outside any unit (docs/agents.md, "Landing green:
the queue").

    projektor land --verify CMD [--project KEY] [--loop] [--batch-max N] [--worktrees DIR]

In the repository it is started in, with a session of its own (heartbeated), it takes
the head batch of the project's landing queue (of every project with entries waiting,
without --project) and tests it (landing.Tester). Without --loop: one take, then exit 0.
With --loop: batch after batch, waiting for the queue's news in between, until ^C or
SIGTERM; a batch under test then is returned to the queue and the session ended.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from projektor_agent import commands, config, gitops, landgit, landing
from projektor_agent.client import Client
from projektor_agent.context import BatchSize, Events, Interrupted, Signals
from projektor_agent.errors import OK, REFUSED, CommandError, Unreachable, UsageError
from projektor_agent.output import say, warn
from projektor_agent.supervise import Watch

WAIT_SECONDS = 25  # one long poll for the queue's news (the server allows 30)
OUTAGE_PAUSE_SECONDS = 5
GRACE_SECONDS = 10.0  # between SIGTERM to a check and its SIGKILL


def main(args: argparse.Namespace) -> int:
    if not 1 <= args.batch_max <= landing.MAX_BATCH:
        raise UsageError(f"--batch-max is {args.batch_max}: give 1 to {landing.MAX_BATCH}")
    if not str(args.verify).strip():
        raise UsageError("--verify is empty: give the landing check, a shell command")
    repo = gitops.toplevel(Path.cwd())
    if repo is None:
        raise UsageError(
            f"{Path.cwd()} is not in a git repository: run projektor land in a checkout of the "
            "repository whose default branch it lands on"
        )
    if not gitops.has_ref(repo, "HEAD"):
        raise UsageError(f"{repo} has no commit yet: nothing to land on")
    client = Client(config.load())
    agent = commands.agent_of(client)
    worktrees = Path(args.worktrees).expanduser().resolve() if args.worktrees else None
    where = landgit.tester_dir(repo, worktrees, agent)
    return Worker(args, client, agent, repo, where).main()


class Worker:
    def __init__(
        self, args: argparse.Namespace, client: Client, agent: str, repo: Path, where: Path
    ) -> None:
        self.args, self.client, self.agent = args, client, agent
        self.repo, self.where = repo, where
        self.project: str | None = args.project
        self.signals = Signals(GRACE_SECONDS)
        self.news = Events(client, self.signals)
        self.testers: dict[str, landing.Tester] = {}
        self.session = 0
        self.ttl = 0.0

    def main(self) -> int:
        previous = {
            sig: signal.signal(sig, self.signals.handle) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            session = self.client.post("/sessions/", {"agent": self.agent})
            self.session = int(session["id"])
            self.ttl = float(session.get("ttl_seconds") or 120)
            queue = f"project {self.project}'s" if self.project else "every project's"
            say(
                f"landing worker {self.agent}: session {self.session}, testing {queue} "
                f"landing queue with `{self.args.verify}` in {self.where}"
            )
            watch = Watch(self.client, self.session, self.ttl, self.on_lost, types="session.ended")
            watch.start()
            try:
                return self.loop(watch)
            except Interrupted:
                return OK
            finally:
                watch.close()
        finally:
            self.end_session()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def on_lost(self, why: str) -> None:
        say(f"landing worker {self.agent}: {why}; stopping")
        self.signals.stop_child()

    def loop(self, watch: Watch) -> int:
        self.news.catch_up(landing.TYPES, self.project)  # before the first take: no news missed
        while True:
            self.signals.check()
            if watch.lost:
                return REFUSED
            try:
                found = self.round()
            except Unreachable as error:
                if not self.args.loop:
                    raise
                warn(f"{error.message}; trying again in {OUTAGE_PAUSE_SECONDS} s")
                self.signals.pause(OUTAGE_PAUSE_SECONDS)
                continue
            if not self.args.loop:
                if found == landing.IDLE:
                    say("landing: nothing waits in the queue")
                elif found == landing.BUSY:
                    say("landing: another tester is testing the queue's batch")
                return OK
            if found != landing.TESTED:
                # A busy tester that dies tells nobody: its batch is free after a TTL.
                wait = min(self.ttl, WAIT_SECONDS) if found == landing.BUSY else WAIT_SECONDS
                self.news.wait(landing.TYPES, wait, self.project)

    def round(self) -> str:
        """A take from each project with entries open (the given one only): TESTED when
        a batch was tested (without --loop, the first one ends the round), else BUSY
        when another tester holds a batch, else IDLE."""
        found = landing.IDLE
        for key in self.projects():
            tester = self.testers.get(key)
            if tester is None:
                tester = landing.Tester(
                    self.client,
                    self.signals,
                    session=self.session,
                    project=key,
                    repo=self.repo,
                    where=self.where,
                    verify=str(self.args.verify),
                    size=BatchSize(int(self.args.batch_max)),
                )
                self.testers[key] = tester
            one = tester.turn()
            if one == landing.TESTED:
                if not self.args.loop:
                    return one
                found = one
            elif one == landing.BUSY and found == landing.IDLE:
                found = one
        return found

    def projects(self) -> list[str]:
        """The projects whose queues have open entries, oldest entry first."""
        if self.project:
            return [self.project]
        oldest: dict[str, int] = {}
        for state in ("testing", "queued"):
            for entry in commands.results(self.client.get("/landings/", {"state": state})):
                key = str(entry.get("project") or "")
                if key:
                    oldest[key] = min(oldest.get(key, int(entry["id"])), int(entry["id"]))
        return sorted(oldest, key=oldest.__getitem__)

    def end_session(self) -> None:
        if not self.session:
            return
        try:
            self.client.post(f"/sessions/{self.session}/end/", idempotent=True)
        except CommandError as error:
            warn(f"could not end the session {self.session}: {error.message}")
