"""One unit of work under ``projektor run``: from a started issue to its hand-in or
its give-back (docs/agents.md, "The agent command")."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from projektor_agent import checkout, gitops, scan
from projektor_agent.checkout import RUNNER_DIR
from projektor_agent.client import Client, holder_name
from projektor_agent.errors import OK, REFUSED, CommandError, Refused, UsageError
from projektor_agent.output import say, warn
from projektor_agent.supervise import Child, Watch, exit_description

VERIFY_TAIL_LINES = 20
REPORT_LIMIT = 4000  # the server's limit of a report's summary and verification
MESSAGE_LIMIT = 10000
SKIPPED = -1  # not worked on: with --next, take other work
BUSY_WAIT_TYPES = "run.finished,run.not_started,session.ended,lease.released"


class Interrupted(Exception):
    """The runner was told to stop (SIGINT or SIGTERM) while no agent was running."""


class SetupError(UsageError):
    """The unit's local setup failed (its worktree, its files); the issue was given
    back. With --loop the runner goes on with other work; without, exit 2."""


class Unresolved(Exception):
    """The server could not resolve the run's worktree: the lease is already released."""


@dataclass
class Unit:
    issue: dict[str, Any]
    session: int
    fence: int | None
    ttl: float
    run: dict[str, Any] | None = None
    workdir: Path | None = None
    base: str | None = None  # what the agent's commits are counted from
    branch: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> int:
        return int(self.issue["id"])


class UnitWork:
    """Works one started unit; ``runner`` supplies the settings and the signal state."""

    def __init__(self, runner: Any, unit: Unit) -> None:
        self.runner, self.unit = runner, unit
        self.client: Client = runner.client
        self.args = runner.args
        self.watch = Watch(
            self.client, unit.session, unit.ttl, self.on_lost, workdir=lambda: unit.workdir
        )
        self.integration: dict[str, Any] | None = None  # the run that lands the branch
        self.scanner = scan.Scanner(self)
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
            self.leave_worktree("the runner stopped")  # done already, unless an error
            checkout.disarm(self)
            self.runner.cursor = max(self.runner.cursor, self.watch.cursor)

    def _work(self) -> int:
        unit = self.unit
        try:
            unit.run = self.dispatch()
            self.resolve_workdir()
            if self.runner.worktrees is None and unit.workdir is not None:
                self.uncommitted_before = checkout.uncommitted(unit.workdir)
            checkout.arm(self)  # the issue's text, the guard, the hooks, the env
        except Unresolved as unresolved:
            say(f"issue {unit.id}: the server could not resolve its worktree: {unresolved}")
            self.runner.skipped.add(unit.id)  # with --next: other work, not this again
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
        if self.runner.interrupted:
            self.give_back("the runner was interrupted before the agent started")
            return REFUSED
        try:
            child = self.runner.spawn(self, self.command(), str(unit.workdir), unit.env)
        except OSError as error:
            name = self.command()[0]
            self.give_back(f"the command {name!r} could not be started: {error.strerror}")
            raise UsageError(f"cannot run {name!r}: {error.strerror or error}") from None
        say(f"issue {unit.id}: agent started (pid {child.process.pid}) in {unit.workdir}")
        scanning = self.scanner.while_running(float(self.args.scan))
        try:
            status = self.runner.supervise(child)
        finally:
            scanning.set()
        if self.watch.lost:
            return self.taken()
        if self.runner.interrupted:
            self.give_back(
                f"the runner was interrupted; the agent {exit_description(status)}", child
            )
            return REFUSED
        if status != 0:
            self.give_back(f"the agent {exit_description(status)}", child)
            return REFUSED
        return self.hand_in()

    # --- before the agent ------------------------------------------------------------------

    def dispatch(self, primary_worktree: bool = False) -> Any:
        """A run for the issue; a busy worktree is waited for on events, then retried.
        With ``primary_worktree``: a run on the project's primary worktree, or None
        when the project has none."""
        body: dict[str, Any] = {"session": self.unit.session, "issue": self.unit.id}
        if primary_worktree:
            body["primary_worktree"] = True
        while True:
            if self.runner.interrupted:
                raise Interrupted()
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
                self.runner.wait_for_events(BUSY_WAIT_TYPES, min(self.unit.ttl, 30.0))

    def resolve_workdir(self) -> None:
        unit, run = self.unit, self.unit.run or {}
        worktrees = self.runner.worktrees
        if run.get("lock_mode") == "exclusive" and worktrees is not None:
            repo = self.runner.repo
            unit.base = gitops.default_branch(repo)
            unit.workdir = worktrees / str(run.get("worktree"))
            leftover = (
                f"projektor: work left uncommitted by a unit of {self.runner.agent} "
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
            "{paths}": " ".join(issue.get("paths") or self.args.paths or []),
        }
        substituted = []
        for argument in self.runner.command:
            for placeholder, value in values.items():
                argument = argument.replace(placeholder, value)
            substituted.append(argument)
        return substituted

    # --- after the agent ---------------------------------------------------------------------

    def on_lost(self, why: str) -> None:
        say(f"issue {self.unit.id}: the work is no longer this agent's: {why}; stopping it")
        self.runner.stop_child()

    def taken(self) -> int:
        """Nothing is finished or handed in for work that another session owns now."""
        say(f"issue {self.unit.id}: not handed in ({self.watch.lost})")
        self.leave_worktree(f"taken: {self.watch.lost}")
        aside = checkout.set_aside(self, f"taken: {self.watch.lost}") or self.left_where
        if aside:
            body = f"projektor run: agent {self.runner.agent} stopped on issue {self.unit.id}"
            self.best_effort("post the message", self.post_message, f"{body}: {aside}.")
        self.end_session()
        return REFUSED

    def hand_in(self) -> int:
        unit = self.unit
        try:
            unsettled = scan.settle(self) if self.args.scan > 0 else None  # 0: off
        except Interrupted:
            self.give_back("the runner was interrupted while the hand-in waited")
            return REFUSED
        if self.watch.lost:
            return self.taken()
        if unsettled:
            self.give_back(f"not handed in: {unsettled}")
            return REFUSED
        self.verification = "no verification command was given; the agent exited 0"
        if self.args.verify:
            passed, self.verification = self.verify()
            if not passed:
                self.give_back(f"the verification failed: {self.verification}")
                return REFUSED
        # What the agent left uncommitted is part of what it hands in: on its branch.
        self.commit_leftover(f"projektor: work of {self.runner.agent} on issue {unit.id}")
        report = self.report(self.verification)  # before landing: the branch's own commits
        if self.watch.lost:
            return self.taken()
        if self.args.integrate:
            from projektor_agent import integrate

            try:
                landed = integrate.integrate(self)
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
            report["verification"] = self.verification[:REPORT_LIMIT]
            landing = f"Landed on {landed.branch}: {landed.commit}"
            report["summary"] = (report["summary"] + "\n" + landing)[-REPORT_LIMIT:]
            if self.integration:
                self.best_effort("finish the integration", self.finish_run, "succeeded", True)
        if self.watch.lost:
            return self.taken()
        self.leave_worktree("handed in")  # before the lease goes: the branch is free
        if unit.run:
            self.best_effort("finish the run", self.finish_run, "succeeded")
        self.watch.close()  # finish_work ends the session: that end is not a loss
        try:
            self.client.post(
                "/work/finish/", {"session": unit.session, "issue": unit.id, "report": report}
            )
        except CommandError:
            self.end_session()  # whatever it still holds is released, not left to the TTL
            raise
        say(f"issue {unit.id}: handed in (in_review): {report['summary'].splitlines()[0]}")
        return OK

    def verify(self) -> tuple[bool, str]:
        result = subprocess.run(
            self.args.verify,
            shell=True,
            cwd=str(self.unit.workdir),
            env=self.unit.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            check=False,
        )
        lines = result.stdout.decode("utf-8", "replace").rstrip().splitlines()
        tail = "\n".join(lines[-VERIFY_TAIL_LINES:])
        text = f"`{self.args.verify}` exited with status {result.returncode}" + (
            f":\n{tail}" if tail else ""
        )
        return result.returncode == 0, text[-REPORT_LIMIT:]

    def report(self, verification: str) -> dict[str, Any]:
        """The child's .projektor/report.json when it wrote one, else the branch's commits."""
        unit = self.unit
        written: dict[str, Any] = {}
        path = (unit.workdir or Path.cwd()) / RUNNER_DIR / "report.json"
        if path.exists():
            try:
                loaded = json.loads(path.read_text(encoding="utf-8"))
                written = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError) as error:
                warn(f"{path} is not a JSON object ({error}); the report is built instead")
        summary = str(written.get("summary") or "").strip()
        if not summary and unit.base and unit.workdir is not None:
            subjects = gitops.commit_subjects(unit.workdir, unit.base)
            summary = "\n".join(f"- {subject}" for subject in subjects)
        if not summary:
            summary = f"`{' '.join(self.runner.command)}` exited 0 with no commits"
        if unit.branch:
            summary += f"\n\nBranch: {unit.branch}"
        if written.get("verification") and not self.args.verify:
            verification = str(written["verification"])
        report = {"summary": summary[:REPORT_LIMIT], "verification": verification[:REPORT_LIMIT]}
        if written.get("pr_link"):
            report["pr_link"] = str(written["pr_link"])
        return report

    def give_back(self, why: str, child: Child | None = None) -> None:
        """The failure path: run failed, issue back in todo with a message saying why,
        lease released, session ended. Each step is tried even if one before failed."""
        unit = self.unit
        say(f"issue {unit.id}: giving it back: {why}")
        self.watch.close()
        self.leave_worktree(why)  # before the lease goes: whoever takes it next finds it free
        body = f"projektor run: agent {self.runner.agent} gave issue {unit.id} back: {why}."
        aside = checkout.set_aside(self, why) or self.left_where
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

    def leave_worktree(self, why: str) -> None:
        """At the unit's end, in the agent's own worktree: what the agent left
        uncommitted goes onto the issue's branch (the next unit there starts clean,
        and whoever takes the issue next continues from it), then the worktree is
        detached, so the branch is checked out nowhere between units. Never in a
        checkout the runner did not make; idempotent."""
        reason = why.splitlines()[0][:200] if why else "given back"
        message = (
            f"projektor: unfinished work of {self.runner.agent} on issue {self.unit.id} ({reason})"
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
        if self.runner.worktrees is None or unit.branch is None or unit.workdir is None:
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

    def end_session(self) -> None:
        self.watch.close()
        self.best_effort(
            "end the session",
            lambda: self.client.post(f"/sessions/{self.unit.session}/end/", idempotent=True),
        )

    def best_effort(self, what: str, call: Any, *args: Any) -> None:
        try:
            call(*args)
        except CommandError as error:
            warn(f"issue {self.unit.id}: could not {what}: {error.message}")
