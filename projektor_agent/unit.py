"""One unit of work under ``projektor run``: from a started issue to its hand-in or
its give-back (docs/agents.md, "The agent command")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from projektor_agent import checkout, gitops, handin, integrate, queued, resources, scan
from projektor_agent.client import holder_name
from projektor_agent.context import SKIPPED, Interrupted, RunContext, SetupError, Unit
from projektor_agent.errors import OK, REFUSED, CommandError, Refused, UsageError
from projektor_agent.output import say, warn
from projektor_agent.supervise import Child, Watch, exit_description

MESSAGE_LIMIT = 10000
# What frees a busy worktree. Not ``run.not_started``: each waiter's own refused retry
# writes one, and waking on it had every waiter wake every other in turn.
BUSY_WAIT_TYPES = "run.finished,session.ended,lease.released"


class Unresolved(Exception):
    """The server could not resolve the run's worktree: the lease is already released."""


class Busy(Exception):
    """A resource of --hold stayed busy for --hold-wait: the issue is given back."""


class UnitWork:
    """Works one started unit, from what ``context`` says of the run."""

    def __init__(self, context: RunContext, unit: Unit) -> None:
        self.context, self.unit = context, unit
        self.client = context.client
        self.options = context.options
        self.watch = Watch(
            self.client, unit.session, unit.ttl, self.on_lost, workdir=lambda: unit.workdir
        )
        self.integration: dict[str, Any] | None = None  # the run that lands the branch
        self.scanner = scan.Scanner(context, unit)
        self.verification = ""
        self.uncommitted_before: str | None = None  # in a checkout the runner did not create
        self.left_where: str | None = None  # where the agent's uncommitted work went

    # --- the whole unit ------------------------------------------------------------------

    def work(self) -> int:
        self.watch.start()
        try:
            return self._work()
        finally:
            self.watch.close()
            self.release_holds()  # done already, unless an error
            self.leave_worktree("the runner stopped")  # done already, unless an error
            checkout.disarm(self.unit)
            self.context.events.saw(self.watch.cursor)

    def _work(self) -> int:
        unit = self.unit
        try:
            self.hold_resources()  # before the run: no worktree is locked while it waits
            unit.run = self.dispatch()
            self.resolve_workdir()
            if self.context.worktrees is None and unit.workdir is not None:
                self.uncommitted_before = checkout.uncommitted(unit.workdir)
            checkout.arm(self.context, unit)  # the issue's text, the guard, the hooks, the env
        except Busy as busy:
            self.give_back(f"a resource it needs stayed busy: {busy}")
            return REFUSED
        except Unresolved as unresolved:
            say(f"issue {unit.id}: the server could not resolve its worktree: {unresolved}")
            self.best_effort("move the issue back to todo", self.back_to_todo)
            self.end_session()
            return SKIPPED
        except Interrupted:
            self.give_back("the runner was interrupted before the agent started")
            return REFUSED
        except CommandError as error:  # a local setup error, or the server failing
            self.give_back(f"the runner could not prepare the work: {error.message}")
            if isinstance(error, UsageError):
                raise SetupError(error.message, body=error.body) from None
            raise
        except OSError as error:  # the worktree or its files could not be written
            self.give_back(f"the runner could not prepare the work: {error}")
            raise SetupError(f"cannot prepare the work for issue {unit.id}: {error}") from None
        if self.watch.lost:
            return self.taken()
        if self.context.signals.interrupted:
            self.give_back("the runner was interrupted before the agent started")
            return REFUSED
        try:
            child = self.context.signals.spawn(self.command(), str(unit.workdir), unit.env)
        except OSError as error:
            name = self.command()[0]
            self.give_back(f"the command {name!r} could not be started: {error.strerror}")
            raise UsageError(f"cannot run {name!r}: {error.strerror or error}") from None
        say(f"issue {unit.id}: agent started (pid {child.process.pid}) in {unit.workdir}")
        scanning = self.scanner.while_running(self.options.scan)
        try:
            status = self.context.signals.supervise(child)
        finally:
            scanning.set()
        if self.watch.lost:
            return self.taken()
        if self.context.signals.interrupted:
            self.give_back(
                f"the runner was interrupted; the agent {exit_description(status)}", child
            )
            return REFUSED
        if status != 0:
            self.give_back(f"the agent {exit_description(status)}", child)
            return REFUSED
        return self.hand_in()

    # --- before the agent ------------------------------------------------------------------

    def hold_resources(self) -> None:
        """Each --hold acquired for the issue, in name order (so two runners never wait
        on each other crosswise), each waiting up to --hold-wait; a signal ends a wait
        at once (Interrupted)."""
        unit, signals = self.unit, self.context.signals
        for want in self.options.holds:
            signals.check()
            signals.waiting = True  # a long call, which a signal cuts short
            try:
                held = resources.acquire(
                    self.client,
                    want,
                    session=unit.session,
                    issue=unit.id,
                    wait=self.options.hold_wait,
                )
            except Refused as refused:
                if refused.code != resources.BUSY:
                    raise
                raise Busy(refused.message) from None
            finally:
                signals.waiting = False
            unit.holds.append(held)
            say(f"issue {unit.id}: holding {held.describe()}")
        signals.check()

    def dispatch(self, primary_worktree: bool = False) -> dict[str, Any] | None:
        """A run for the issue; a busy worktree is waited for on events, then retried.
        With ``primary_worktree``: a run on the project's primary worktree, or None
        when the project has none."""
        body: dict[str, Any] = {"session": self.unit.session, "issue": self.unit.id}
        if primary_worktree:
            body["primary_worktree"] = True
        while True:
            self.context.signals.check()
            try:
                return dict(self.client.post("/runs/", body))
            except UsageError as error:
                no_primary = isinstance(error.body, dict) and (
                    error.body.get("field") == "primary_worktree"
                )
                if primary_worktree and no_primary:
                    return None
                raise
            except Refused as refused:
                if refused.code == "worktree_unresolved":
                    raise Unresolved(refused.message) from None
                if refused.code != "worktree_busy":
                    raise
                holder = refused.body.get("holder") if isinstance(refused.body, dict) else None
                who = holder_name(holder) if isinstance(holder, dict) else "another run"
                say(f"issue {self.unit.id}: its worktree is busy ({who}); waiting for it")
                self.context.events.wait(BUSY_WAIT_TYPES, min(self.unit.ttl, 30.0))

    def resolve_workdir(self) -> None:
        unit, run = self.unit, self.unit.run or {}
        repo, worktrees = self.context.repo, self.context.worktrees
        if run.get("lock_mode") == "exclusive" and repo is not None and worktrees is not None:
            unit.base = gitops.default_branch(repo)
            unit.workdir = worktrees / str(run.get("worktree"))
            leftover = (
                f"projektor: work left uncommitted by a unit of {self.context.agent} "
                "that did not end (its runner stopped)"
            )
            kept = gitops.keep_leftover(repo, unit.workdir, leftover)
            if kept:
                say(f"{unit.workdir}: what an earlier unit left uncommitted is kept on {kept}")
            name = gitops.branch_name(unit.id, str(unit.issue.get("title", "")))
            unit.branch = gitops.prepare_worktree(repo, unit.workdir, name, unit.base)
            return
        unit.workdir = Path.cwd()
        if run.get("lock_mode") == "exclusive" and gitops.toplevel(unit.workdir) is None:
            raise UsageError(
                f"issue {unit.id} requires the filesystem (lock mode exclusive), and "
                f"{unit.workdir} is not in a git repository"
            )
        if gitops.toplevel(unit.workdir) is not None and gitops.has_ref(unit.workdir, "HEAD"):
            unit.base = gitops.git("rev-parse", "HEAD", cwd=unit.workdir).stdout.strip()

    def command(self) -> list[str]:
        issue = self.unit.issue
        values = {
            "{issue}": str(issue["id"]),
            "{title}": str(issue.get("title") or ""),
            "{description}": str(issue.get("description") or ""),
            "{paths}": " ".join(issue.get("paths") or self.options.paths or []),
        }
        substituted = []
        for argument in self.context.command:
            for placeholder, value in values.items():
                argument = argument.replace(placeholder, value)
            substituted.append(argument)
        return substituted

    # --- after the agent ---------------------------------------------------------------------

    def on_lost(self, why: str) -> None:
        say(f"issue {self.unit.id}: the work is no longer this agent's: {why}; stopping it")
        self.context.signals.stop_child()

    def taken(self) -> int:
        """Nothing is finished or handed in for work that is not this agent's now. Unless
        another session holds the issue's lease (a takeover), the issue goes back to
        ``todo``: only its claims went, or its lease was let go, and no one else has it."""
        unit, lost = self.unit, self.watch.lost
        say(f"issue {unit.id}: not handed in ({lost})")
        self.leave_worktree(f"taken: {lost}")
        aside = self.set_aside(f"taken: {lost}")
        returned = self.still_ours_to_return()
        body = f"projektor run: agent {self.context.agent} stopped on issue {unit.id} ({lost})"
        if returned:
            body += "; the issue is back in todo"
        if aside:
            body += f"; where its work went: {aside}"
        if aside or returned:
            self.best_effort("post the message", self.post_message, f"{body}.")
        if returned:
            say(f"issue {unit.id}: no other session holds it: back to todo")
            self.best_effort("move the issue back to todo", self.back_to_todo)
            self.best_effort("release the lease", self.release_lease)
        self.end_session()
        return REFUSED

    def still_ours_to_return(self) -> bool:
        """The issue is still in progress (not closed), and its unreleased lease is this
        unit's session's or there is none (no one took it over)."""
        try:
            issue = self.client.get(f"/issues/{self.unit.id}/")
        except CommandError as error:
            warn(f"issue {self.unit.id}: could not read who holds it: {error.message}")
            return False
        lease = issue.get("lease")
        mine = not lease or lease.get("session") == self.unit.session
        return issue.get("status") == "in_progress" and mine

    def hand_in(self) -> int:
        unit = self.unit
        try:
            unsettled = self.scanner.settle(self.watch) if self.options.scan > 0 else None
        except Interrupted:
            self.give_back("the runner was interrupted while the hand-in waited")
            return REFUSED
        if self.watch.lost:
            return self.taken()
        if unsettled:
            self.give_back(f"not handed in: {unsettled}")
            return REFUSED
        self.verification = "no verification command was given; the agent exited 0"
        if self.options.verify and not self.options.queue:  # with --queue: the testers'
            passed, self.verification = handin.verify(self.options.verify, unit)
            if not passed:
                self.give_back(f"the verification failed: {self.verification}")
                return REFUSED
        # What the agent left uncommitted is part of what it hands in: on its branch.
        self.commit_leftover(f"projektor: work of {self.context.agent} on issue {unit.id}")
        # Before landing: the branch's own commits.
        report = handin.report(self.context, unit, self.verification)
        if self.watch.lost:
            return self.taken()
        if self.options.integrate:
            try:
                integrate.prepare(self.context, unit)
                if self.options.queue:
                    landed = queued.land(self.context, unit, self.watch)
                else:
                    self.integration = self.dispatch(primary_worktree=True)
                    landed = integrate.land(self.context, unit, self.integration, self.watch)
            except (integrate.Failed, Interrupted) as failed:
                if self.watch.lost:  # another session's work now: nothing done for it
                    if self.integration and self.integration.get("status") == "running":
                        self.best_effort("finish the integration", self.finish_run, "failed", True)
                    return self.taken()
                self.give_back(f"not integrated: {str(failed) or 'the runner was interrupted'}")
                return REFUSED
            except CommandError as error:
                self.give_back(f"not integrated: {error.message}")
                raise
            self.verification = landed.verification or self.verification
            report["verification"] = self.verification[: handin.REPORT_LIMIT]
            landing = f"Landed on {landed.branch}: {landed.commit}"
            report["summary"] = (report["summary"] + "\n" + landing)[-handin.REPORT_LIMIT :]
            if self.integration:
                self.best_effort("finish the integration", self.finish_run, "succeeded", True)
        if self.watch.lost:
            return self.taken()
        self.leave_worktree("handed in")  # before the lease goes: the branch is free
        if unit.run:
            self.best_effort("finish the run", self.finish_run, "succeeded")
        self.watch.close()  # finish_work ends the session: that end is not a loss
        self.release_holds()  # after the verification and the landing, which may use them
        try:
            self.client.post(
                "/work/finish/", {"session": unit.session, "issue": unit.id, "report": report}
            )
        except CommandError:
            self.end_session()  # whatever it still holds is released, not left to the TTL
            raise
        say(f"issue {unit.id}: handed in (in_review): {report['summary'].splitlines()[0]}")
        return OK

    def give_back(self, why: str, child: Child | None = None) -> None:
        """The failure path: run failed, issue back in todo with a message saying why,
        lease released, session ended. Each step is tried even if one before failed."""
        unit = self.unit
        say(f"issue {unit.id}: giving it back: {why}")
        self.watch.close()
        self.leave_worktree(why)  # before the lease goes: whoever takes it next finds it free
        body = f"projektor run: agent {self.context.agent} gave issue {unit.id} back: {why}."
        aside = self.set_aside(why)
        if aside:
            body += f"\n\nWhere its work went: {aside}."
        if child is not None and child.tail:
            body += "\n\nThe last lines of its stderr:\n```\n" + "\n".join(child.tail) + "\n```"
        if self.integration and self.integration.get("status") == "running":
            self.best_effort("finish the integration", self.finish_run, "failed", True)
        if unit.run and unit.run.get("status") == "running":
            self.best_effort("finish the run", self.finish_run, "failed")
        self.best_effort("post the message", self.post_message, body[-MESSAGE_LIMIT:])
        self.best_effort("move the issue back to todo", self.back_to_todo)
        self.best_effort("release the lease", self.release_lease)
        self.end_session()

    def set_aside(self, why: str) -> str | None:
        """Where the stopped agent's uncommitted work went, if anywhere."""
        before = self.uncommitted_before
        return checkout.set_aside(self.context, self.unit, before, why) or self.left_where

    def leave_worktree(self, why: str) -> None:
        """At the unit's end, in the agent's own worktree: what the agent left
        uncommitted goes onto the issue's branch (the next unit there starts clean,
        and whoever takes the issue next continues from it), then the worktree is
        detached, so the branch is checked out nowhere between units. Never in a
        checkout the runner did not make; idempotent."""
        reason = why.splitlines()[0][:200] if why else "given back"
        message = (
            f"projektor: unfinished work of {self.context.agent} on issue {self.unit.id} ({reason})"
        )
        workdir = self.unit.workdir
        if workdir is None or not self.commit_leftover(message):
            return
        try:
            gitops.detach(workdir)
        except (gitops.GitError, OSError) as error:
            warn(f"issue {self.unit.id}: could not detach its worktree: {error}")

    def commit_leftover(self, message: str) -> bool:
        """What is uncommitted, committed onto the issue's branch; False when the
        worktree is not the runner's or not on that branch (nothing of the unit's
        there). A branch that moved under the worktree is left as it is: what looks
        uncommitted may be the reverse of a commit made elsewhere."""
        unit = self.unit
        if self.context.worktrees is None or unit.branch is None or unit.workdir is None:
            return False
        try:
            if gitops.current_branch(unit.workdir) != unit.branch:
                return False  # the unit never got its branch checked out, or left it
            if gitops.moved_under(unit.workdir):
                warn(
                    f"issue {unit.id}: {unit.branch} moved under {unit.workdir}: what looks "
                    "uncommitted there is left as it is (it may undo the branch's new commits)"
                )
                return True
            if gitops.commit_all(unit.workdir, message):
                self.left_where = f"its uncommitted work was committed on {unit.branch}"
                say(f"issue {unit.id}: {self.left_where}")
        except (gitops.GitError, OSError) as error:
            warn(f"issue {unit.id}: could not keep the uncommitted work: {error}")
        return True

    # --- the calls, each for best_effort ---------------------------------------------------

    def finish_run(self, outcome: str, integration: bool = False) -> None:
        run = (self.integration if integration else self.unit.run) or {}
        body: dict[str, Any] = {"outcome": outcome}
        if run.get("fence") is not None:
            body["fence"] = run["fence"]
        self.client.post(f"/runs/{run['id']}/finish/", body)
        run["status"] = outcome

    def post_message(self, body: str) -> None:
        self.client.post(
            "/messages/",
            {"scope": f"issue:{self.unit.id}", "body": body, "session": self.unit.session},
        )

    def back_to_todo(self) -> None:
        issue = self.client.get(f"/issues/{self.unit.id}/")
        if issue.get("status") == "in_progress":
            self.client.post(f"/issues/{self.unit.id}/transition/", {"to": "todo"})

    def release_lease(self) -> None:
        body: dict[str, Any] = {"session": self.unit.session}
        if self.unit.fence is not None:
            body["fence"] = self.unit.fence
        try:
            self.client.post(f"/issues/{self.unit.id}/release/", body)
        except Refused as refused:
            if refused.code != "lease_not_held":  # already released: nothing to do
                raise

    def release_holds(self) -> None:
        """What --hold took for the unit, let go (idempotent: each hold once)."""
        while self.unit.holds:
            held = self.unit.holds.pop()
            self.best_effort(
                f"release {held.name}", resources.release, self.client, held, self.unit.session
            )

    def end_session(self) -> None:
        self.watch.close()
        self.release_holds()
        self.best_effort(
            "end the session",
            lambda: self.client.post(f"/sessions/{self.unit.session}/end/", idempotent=True),
        )

    def best_effort(self, what: str, call: Callable[..., object], *args: object) -> None:
        try:
            call(*args)
        except CommandError as error:
            warn(f"issue {self.unit.id}: could not {what}: {error.message}")
