"""``projektor run``: take issues and run an agent command on each, keeping the
protocol for it (docs/agents.md, "The agent command").

    projektor run [--issue N | --next [--project KEY]] [--paths P …] [--loop]
                  [--worktrees DIR [--integrate [--queue [--batch-max N]]]] [--verify CMD]
                  [--hooks HARNESS[,…]|auto]
                  [--scan SECONDS] [--on-conflict wait|fail]
                  [--hold NAME[:UNITS] …] [--hold-wait S] -- COMMAND [ARG …]

--integrate lands the issue's branch on the default branch before the hand-in, while
the lease and claims are still held, one integration at a time per project (a run on
the project's primary worktree); with --queue, through the project's landing queue
instead, --verify being the check its testers run on each batch (the runner is one of
them while its entry waits: docs/agents.md, "Landing green: the queue"). --scan claims
the paths the agent changed, every SECONDS and before the hand-in (0: off); a path
another issue holds makes the hand-in wait (--on-conflict wait) or fail (--on-conflict
fail). --hold holds a resource's units for each issue, from its start to its hand-in or
give-back (docs/agents.md, "Holding a resource"); one still busy after --hold-wait gives
the issue back.

Exit status without --loop: 0 handed in; 1 the agent failed, its work was taken, or
nothing could be taken; 2 a usage or local setup error; 3 the server unreachable.
With --loop it runs until interrupted, and exits 0 then; a local setup error of one
unit (a worktree it cannot use) gives that issue back, and the loop goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import threading
import time
import zlib
from pathlib import Path
from typing import Any

from projektor_agent import commands, config, gitops, hook_install, resources
from projektor_agent.client import Client, for_issue
from projektor_agent.context import (
    SKIPPED,
    BatchSize,
    Events,
    Interrupted,
    Options,
    RunContext,
    SetupError,
    Signals,
    Unit,
)
from projektor_agent.errors import OK, REFUSED, Refused, Unreachable, UsageError
from projektor_agent.landing import MAX_BATCH
from projektor_agent.output import emit, say, warn
from projektor_agent.supervise import resolved
from projektor_agent.unit import UnitWork

DEFAULT_TTL = 120.0
# What can make an issue startable: a new or moved issue, a blocker done, a lease or an
# issue's claims let go (an issue whose declared files another holds is not tried).
QUEUE_WAIT_TYPES = "issue.created,issue.transitioned,issue.unblocked,lease.released,claims.released"
QUEUE_WAIT_SECONDS = 25
OUTAGE_PAUSE_SECONDS = 5
SETUP_PAUSE_SECONDS = 5
# Refusals that mean "someone else has this one": with --next, take the next.
TAKEN_ELSEWHERE = ("lease_held", "blocked", "file_conflict", "invalid_transition", "issue_closed")


def spread(candidates: list[Any], agent: str) -> list[Any]:
    """The rest of the queue after a lost race, starting at a place of this agent's own.
    Idle runners woken by one event read the same queue and race for its head; each
    that loses tries next where the others are unlikely to, instead of all of them
    walking down the queue together (a refused start each, for each issue passed)."""
    if len(candidates) < 2:
        return candidates
    place = zlib.crc32(agent.encode()) % len(candidates)
    return candidates[place:] + candidates[:place]


def run(args: argparse.Namespace) -> int:
    command = list(args.agent_command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError(
            "no agent command: give it after --, e.g. projektor run --next -- ./agent.sh"
        )
    if args.loop:
        args.next = True
    if not args.next and args.issue is None:
        raise UsageError("which work? give --issue N or --next (or --loop)")
    if args.issue is not None and args.issue <= 0:
        raise UsageError(f"--issue is {args.issue}: give the id of an issue")
    if args.queue and not (args.integrate and args.worktrees and args.verify):
        raise UsageError(
            "--queue needs --integrate, --worktrees DIR and --verify CMD (the landing check "
            "the queue's testers run on each batch): nothing taken"
        )
    if args.integrate and not args.worktrees:
        raise UsageError("--integrate needs --worktrees DIR: it lands the issue's own branch")
    if not 1 <= args.batch_max <= MAX_BATCH:
        raise UsageError(f"--batch-max is {args.batch_max}: give 1 to {MAX_BATCH}")
    if args.scan < 0:
        raise UsageError(f"--scan is {args.scan:g}: give seconds, or 0 for no periodic scan")
    if args.hold_wait < 0:
        raise UsageError(f"--hold-wait is {args.hold_wait:g}: give seconds, or 0 for no wait")
    # Before anything is taken: a typo takes no issue.
    command = resolved(command, "the agent command", "nothing taken")
    return Runner(Options.parsed(args), Client(config.load()), command).main()


def needs_files(issue: dict[str, Any]) -> bool:
    """A run of ``issue`` locks a worktree (lock mode exclusive): invariant 10 (Lock
    mode per run)."""
    return bool(issue.get("requires_filesystem") or issue.get("worktree"))


class Runner:
    """Takes issues one after another and works each as a unit (unit.UnitWork), handing
    it the RunContext made once the agent and its worktrees are known."""

    def __init__(self, options: Options, client: Client, command: list[str]) -> None:
        self.options, self.client, self.command = options, client, command
        self.agent = ""
        self.repo: Path | None = None
        self.worktrees: Path | None = None
        self.worktree_slug: str | None = None
        self.signals = Signals(options.grace)
        self.events = Events(client, self.signals)
        self.skipped: set[int] = set()  # issues whose worktree could not be resolved
        # Issues this runner gave back, and until when (monotonic) other runners go first.
        self.gave_back: dict[int, float] = {}
        self.passed_over: set[int] = set()  # skipped by the next pass: a local setup failed
        self.colliding: list[str] = []  # the issues not tried last pass: said when it changes
        self.outside_git = False  # the current directory is in no git repository

    @property
    def interrupted(self) -> bool:
        return self.signals.interrupted

    # --- the loop --------------------------------------------------------------------------

    def main(self) -> int:
        self.agent = commands.agent_of(self.client)
        resources.check(self.client, self.options.holds)  # a typo takes no issue either
        for harness in self.options.hooks:  # what the user must do before the CLI runs them
            note = hook_install.TARGETS[harness].note
            if note:
                say(note)
        if self.options.worktrees:
            self.prepare_worktrees(Path(self.options.worktrees).expanduser())
        elif gitops.toplevel(Path.cwd()) is None:
            self.outside_git = True
            say(
                f"{Path.cwd()} is not in a git repository: only work that needs no files "
                "(lock mode none) runs here; an issue that requires the filesystem is not taken"
            )
        context = RunContext(
            client=self.client,
            agent=self.agent,
            command=self.command,
            options=self.options,
            repo=self.repo,
            worktrees=self.worktrees,
            signals=self.signals,
            events=self.events,
            batch=BatchSize(self.options.batch_max),
        )
        previous = {
            sig: signal.signal(sig, self.signals.handle) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            return self.loop(context)
        except Interrupted:
            return OK if self.options.loop else REFUSED
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def loop(self, context: RunContext) -> int:
        while True:
            self.signals.check()
            try:
                unit = self.take()
                if unit is None and self.options.loop:
                    self.events.wait(QUEUE_WAIT_TYPES, self.queue_wait())
                    continue
            except Unreachable as error:
                if not self.options.loop:
                    raise
                # A loop outlives an outage: it tries again after a pause, not at once.
                warn(f"{error.message}; trying again in {OUTAGE_PAUSE_SECONDS} s")
                threading.Event().wait(OUTAGE_PAUSE_SECONDS)
                continue
            if unit is None:
                say("nothing to take: the ready queue has no issue this agent may start")
                return REFUSED
            try:
                status = UnitWork(context, unit).work()
            except SetupError as error:
                if not self.options.loop:
                    raise
                self.after_setup_error(unit, error)
                continue
            if status == SKIPPED:
                self.skipped.add(unit.id)  # with --next: other work, not this again
                if self.options.next:
                    continue
                status = REFUSED
            if status != OK:
                # Work an agent failed on goes to another agent first (it may fare better
                # there); this runner takes it again only when no other did within a TTL.
                self.gave_back[unit.id] = time.monotonic() + unit.ttl
            outcome = "handed_in" if status == OK else "not_handed_in"
            emit(self.options.json, {"issue": unit.id, "outcome": outcome, "exit_status": status})
            if not self.options.loop:
                return status
            if self.interrupted:
                return OK

    def take(self) -> Unit | None:
        """Start the next issue: --issue N, or the first of the ready queue that no
        other runner took first (collisions avoided when the server says so)."""
        if self.options.issue is not None:
            if self.outside_git and needs_files(self.client.get(f"/issues/{self.options.issue}/")):
                raise UsageError(
                    f"issue {self.options.issue} requires the filesystem, and {Path.cwd()} is not "
                    "in a git repository: run projektor from a checkout of the repository "
                    "(nothing taken)"
                )
            return self.start(self.options.issue)
        try:
            return self.take_from_queue()
        finally:
            self.passed_over.clear()  # the end of a pass: the next one tries them again

    def take_from_queue(self) -> Unit | None:
        """One pass down the ready queue, past the issues passed over. An issue whose
        declared files another issue holds is not tried (the start would be refused):
        the release of those claims wakes the runner for another pass. With --paths
        (the paths claimed are the runner's, not the issue's) it is tried last."""
        query = {"project": self.options.project}
        ready = commands.results(self.client.get("/issues/ready/", query))
        candidates = [i for i in ready if not i.get("collisions")]
        if self.options.paths:  # the runner's own paths, not the issues': they may be free
            candidates += [i for i in ready if i.get("collisions")]
        else:
            colliding = [str(i["id"]) for i in ready if i.get("collisions")]
            if colliding and colliding != self.colliding:
                say(f"issues {', '.join(colliding)}: their declared files are held; not tried")
            self.colliding = colliding
        full: set[Any] = set()  # projects at their WIP limit: their other issues wait too
        while candidates:
            issue = candidates.pop(0)
            self.signals.check()
            if self.not_tried(issue, full):
                continue
            try:
                return self.start(int(issue["id"]))
            except Refused as refused:
                if refused.code == "wip_limit_reached":
                    say(f"issue {issue['id']}: its project is at its WIP limit; trying another")
                    full.add(issue.get("project"))
                    continue
                if refused.code not in TAKEN_ELSEWHERE:
                    raise
                say(f"issue {issue['id']} was taken first ({refused.message}); trying another")
                candidates = spread(candidates, self.agent)
        return self.take_over_dead_work(full)

    def take_over_dead_work(self, full: set[Any]) -> Unit | None:
        """After the ready queue: an issue in progress whose holder died (its lease
        unreleased, not live: a killed runner's). Its start takes it over, with the dead
        session's claims on it; no sweep ever gives it back, so a runner does. An issue
        moved to in progress by a person, with no lease, is left to them."""
        query = {"project": self.options.project, "status": "in_progress", "leased": "false"}
        for issue in commands.results(self.client.get("/issues/", query)):
            self.signals.check()
            lease = issue.get("lease")
            if not lease or lease.get("live") or self.not_tried(issue, full):
                continue
            try:
                unit = self.start(int(issue["id"]))
            except Refused as refused:
                if refused.code == "wip_limit_reached":
                    full.add(issue.get("project"))
                    continue
                if refused.code not in TAKEN_ELSEWHERE:
                    raise
                continue
            say(f"issue {issue['id']}: taken over from agent {lease.get('agent')}, whose "
                "session stopped heartbeating")  # fmt: skip
            return unit
        return None

    def not_tried(self, issue: dict[str, Any], full: set[Any]) -> bool:
        """Passed over this pass: skipped, passed over or given back by this runner, its
        project at its WIP limit, or needing files outside a checkout (left to a runner
        in one)."""
        return (
            int(issue["id"]) in self.skipped | self.passed_over | self.deferred()
            or issue.get("project") in full
            or (self.outside_git and needs_files(issue))
        )

    def deferred(self) -> set[int]:
        """The issues this runner gave back whose turn for other runners lasts."""
        now = time.monotonic()
        self.gave_back = {key: until for key, until in self.gave_back.items() if until > now}
        return set(self.gave_back)

    def queue_wait(self) -> float:
        """How long to wait for the queue: until news, or the first deferral's end."""
        if not self.gave_back:
            return QUEUE_WAIT_SECONDS
        return min(QUEUE_WAIT_SECONDS, max(1.0, min(self.gave_back.values()) - time.monotonic()))

    def after_setup_error(self, unit: Unit, error: SetupError) -> None:
        """A --loop outlives a local setup error of one unit (the issue was given
        back): other work after a pause, that issue not in the next pass of the queue
        (the one after it tries it again)."""
        warn(f"issue {unit.id}: {error.message}; other work in {SETUP_PAUSE_SECONDS} s")
        emit(self.options.json, {"issue": unit.id, "outcome": "not_handed_in", "exit_status": 2})
        self.passed_over.add(unit.id)
        self.signals.pause(SETUP_PAUSE_SECONDS)  # a signal ends it (and the loop) at once
        # The give-back's own events are no news of work: a wait for the queue that
        # follows is woken by later ones only.
        with contextlib.suppress(Unreachable):  # the next take says so, and waits
            self.events.catch_up(QUEUE_WAIT_TYPES)

    def start(self, issue_id: int) -> Unit:
        body: dict[str, Any] = {"agent": self.agent, "issue": issue_id}
        if self.options.paths:
            body["paths"] = self.options.paths
        if self.worktree_slug:
            body["worktree"] = self.worktree_slug
        try:
            started = self.client.post("/work/start/", body)
        except Refused as refused:
            raise for_issue(refused, issue_id) from None
        session = started["session"]
        issue = self.client.get(f"/issues/{issue_id}/")
        lease = started.get("lease") or {}
        say(f"issue {issue_id}: started ({issue.get('title')}), session {session['id']}")
        return Unit(
            issue=issue,
            session=int(session["id"]),
            fence=lease.get("fence"),
            ttl=float(session.get("ttl_seconds") or DEFAULT_TTL),
        )

    def prepare_worktrees(self, where: Path) -> None:
        """The repository the worktrees are made from (the current directory's), and
        the agent's worktree registered with the server, so that runs bind to it."""
        repo = gitops.toplevel(Path.cwd())
        if repo is None:
            raise UsageError(
                f"--worktrees needs a git repository: {Path.cwd()} is not in one "
                "(run projektor from a checkout of the repository the agents work on)"
            )
        if not gitops.has_ref(repo, "HEAD"):
            raise UsageError(f"{repo} has no commit yet: a worktree needs a branch to start from")
        self.repo, self.worktrees = repo, where.resolve()
        slug = re.sub(r"[^A-Za-z0-9_-]+", "-", self.agent).strip("-")[:50] or "agent"
        body = {
            "slug": slug,
            "name": f"{self.agent}'s worktree",
            "path": str(self.worktrees / slug),
        }
        try:
            self.client.post("/worktrees/", body)
        except UsageError as error:
            if error.http_status != 400:  # 400: the slug exists, registered before
                raise
        except Refused as refused:  # an agent key may not create worktrees
            warn(f"could not register the worktree {slug}: {refused.message}")
        self.worktree_slug = slug
