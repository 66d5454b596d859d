#!/usr/bin/env python3
"""The scripted agent: a stand-in for a coding agent, working one issue of a plan.

    projektor run --loop --worktrees DIR [--hooks NAME] -- \\
        python demo/workbench/agent.py --plan PLAN [--coordinated [--harness NAME]] [--check]

(or ``python -m demo.workbench.agent …``). It works the issue ``PROJEKTOR_ISSUE`` (or
``--issue N``; a server id, or a plan key when the plan has no ids) of the plan file
``--plan`` (or ``PROJEKTOR_WORKBENCH_PLAN``; written by ``repository.create``), in the
current directory, a checkout of the generated repository:

- it edits the issue's declared files, then its undeclared extra ones, a few seconds
  apart (the issue's ``work_seconds`` spread between the edits: a long worker outlasts
  the session TTL, which only its runner's heartbeats survive). Each edit inserts a
  few lines naming the issue: in a hot file just above one of its marker lines (where
  every change adds its entry, so two made apart conflict under a rebase), elsewhere
  at a random line;
- on its first attempt at an issue planned to crash, after ``crash_after`` edits it
  exits 1 or SIGKILLs itself (attempts are counted in ``PLAN.attempts/``);
- a semantic pair's member (the plan's ``semantic``) makes its one edit in code: the
  *rename* renames the function in its service module and in every caller it finds
  under ``src/`` of its checkout (each caller announced too when coordinated, all or
  nothing: a caller still refused after the retries is exit 1, the issue given back);
  the *call* appends to its file a function calling that service module's function by
  the name it finds there now, and a ``check_`` function for it. Each commit the agent
  makes passes the check on its own base;
- it commits its work on the branch checked out (one commit, subject the issue's title,
  trailer ``Workbench-Issue: <key>``) and exits 0. A branch that already holds an
  earlier attempt's commit (its integration failed) is reset to the newest base first:
  the work is done again from there, as an agent redoes a change that no longer applies.
  As it exits 0 it notes the time (``PLAN.ready/<key>.<attempt>``, seconds since the
  epoch): its work is ready to land.

``--check`` (or ``PROJEKTOR_WORKBENCH_CHECK=1``): after the commit it runs the
repository's check (``check.py``) in its checkout, as a pull request's CI does on the
branch alone, and exits 1 saying what failed when its work broke something; failures
its base already had (a check run at 0 seconds before its first edit) are not its own.

``--coordinated`` (or ``PROJEKTOR_WORKBENCH_COORDINATED=1``): before each edit it
announces it as the agent CLI ``--harness NAME`` would (or
``PROJEKTOR_WORKBENCH_HARNESS``; ``claude-code`` by default, else ``codex``, ``gemini``,
``cursor``, ``copilot``): it runs the hooks that CLI's own file in the checkout names
(what ``projektor run --hooks NAME`` installs; without it, ``python -m projektor_agent
hook NAME``) with that CLI's payload on stdin, and obeys a refusal read that CLI's way
(``speech``): a declared file is waited for and tried again a few times with backoff,
then left; an undeclared one is swapped for its alternative (announced in turn), else
left. After each edit Claude Code's ``PostToolUse`` hooks run (progress). Without it, it
edits without a word.

``--hold-tests NAME`` (or ``PROJEKTOR_WORKBENCH_HOLD_TESTS``): after its edits it runs
"its tests" (a third of its work time, at most ``TESTS_LONGEST_SECONDS``) while it holds
a unit of the resource NAME, a test database, as a real agent would:
``projektor hold NAME --wait 30 -- <the tests>`` (inside ``projektor run`` the hold is
taken in the runner's session; the tests name the database by their slot). The
resource still busy after the wait, or the server unreachable, it says so and commits
untested. Without it, no tests.

Standard library only: it runs beside any server, and imports nothing of Projektor.
Exit status: 0 committed (or nothing left to change), 1 a planned crash, a git
failure, a failed ``--check`` or a rename whose callers stayed someone else's, 2 a usage
error.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

try:
    from demo.workbench import checks, layout, speech
    from demo.workbench.hooks import RETRIES, Hooks
except ImportError:  # run as a script (python demo/workbench/agent.py): its folder is on the path
    import checks  # type: ignore[no-redef]
    import layout  # type: ignore[no-redef]
    import speech  # type: ignore[no-redef]
    from hooks import RETRIES, Hooks  # type: ignore[no-redef]

TRAILER = "Workbench-Issue"
TRUE_WORDS = ("1", "true", "yes", "on")
TESTS_SHARE = 1 / 3  # of the issue's work time: how long its tests run
TESTS_LONGEST_SECONDS = 20.0
TESTS_WAIT_SECONDS = 30  # for a unit of the test resource, in its line
# The tests, run by ``projektor hold``: they name the database of their slot, and take
# their time.
TESTS = (
    "import os, sys, time; "
    "slot = os.environ.get('PROJEKTOR_SLOT', '?'); "
    "print(f'workbench tests: {sys.argv[2]} against test_{slot}', file=sys.stderr, flush=True); "
    "time.sleep(float(sys.argv[1]))"
)


def say(text: str) -> None:
    print(f"workbench agent: {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The workbench's scripted agent.")
    parser.add_argument("--plan", default=os.environ.get("PROJEKTOR_WORKBENCH_PLAN"))
    parser.add_argument("--issue", default=os.environ.get("PROJEKTOR_ISSUE"))
    parser.add_argument(
        "--coordinated",
        action="store_true",
        default=os.environ.get("PROJEKTOR_WORKBENCH_COORDINATED", "").lower() in TRUE_WORDS,
    )
    parser.add_argument(
        "--harness",
        choices=speech.HARNESSES,
        default=os.environ.get("PROJEKTOR_WORKBENCH_HARNESS") or "claude-code",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        default=os.environ.get("PROJEKTOR_WORKBENCH_CHECK", "").lower() in TRUE_WORDS,
    )
    parser.add_argument(
        "--hold-tests",
        metavar="NAME",
        default=os.environ.get("PROJEKTOR_WORKBENCH_HOLD_TESTS") or None,
    )
    args, _ = parser.parse_known_args(argv)  # the rest: a runner's placeholders, ignored
    if not args.plan or not args.issue or not str(args.issue).isdigit():
        say(
            "usage: agent.py --plan PLAN [--issue N] (or PROJEKTOR_WORKBENCH_PLAN, PROJEKTOR_ISSUE)"
        )
        return 2
    plan_path = Path(args.plan)
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    issue = find(plan, int(args.issue))
    if issue is None:
        say(f"issue {args.issue} is not in the plan {plan_path}")
        return 2
    work = Work(
        plan,
        issue,
        plan_path,
        Path.cwd(),
        args.coordinated,
        args.hold_tests,
        harness=args.harness,
        check=args.check,
    )
    return work.run()


def find(plan: dict[str, Any], number: int) -> dict[str, Any] | None:
    for issue in plan["issues"]:
        if issue.get("id") == number:
            return issue
    if all(issue.get("id") is None for issue in plan["issues"]):
        for issue in plan["issues"]:
            if issue["key"] == number:
                return issue
    return None


class Refused(Exception):
    """A file the work cannot do without stayed someone else's."""


class Work:
    def __init__(
        self,
        plan: dict[str, Any],
        issue: dict[str, Any],
        plan_path: Path,
        root: Path,
        coordinated: bool,
        hold_tests: str | None = None,
        *,
        harness: str = "claude-code",  # the agent CLI whose hooks it speaks to (speech)
        check: bool = False,  # run the check before exiting, as a pull request's CI
    ) -> None:
        self.plan, self.issue, self.root = plan, issue, root
        self.coordinated = coordinated
        self.hold_tests = hold_tests
        self.check = check
        self.plan_path = plan_path
        self.key = int(issue["key"])
        self.attempt = count_attempt(plan_path, self.key)
        self.hooks = Hooks(root, harness, f"workbench-{self.key}-{self.attempt}", say)
        self.rng = random.Random(f"{plan['seed']}:{self.key}:{self.attempt}")
        self.edited: list[str] = []

    def run(self) -> int:
        self.start_fresh_if_redone()
        baseline = self.failing(seconds=0) if self.check else set()
        declared = [(path, None) for path in self.issue["paths"]]
        alternatives = self.issue["alternatives"]
        extra = [(path, alternatives[n]) for n, path in enumerate(self.issue["extra"])]
        steps: list[tuple[str, str | None]] = declared + extra
        pause = float(self.issue["work_seconds"]) / (len(steps) + 1)
        crash = self.issue.get("crash") if self.attempt == 1 else None
        for done, (path, alternative) in enumerate(steps):
            if crash and done == int(self.issue.get("crash_after", 1)):
                self.crash(crash)
            time.sleep(pause)
            try:
                self.step(path, alternative)
            except Refused as refused:
                say(f"{refused}: giving the issue back")
                return 1
        if crash:
            self.crash(crash)
        time.sleep(pause)
        self.run_tests()
        status = self.commit()
        if status == 0 and self.check:
            status = self.run_check(baseline)
        if status == 0:
            self.note_ready()
        return status

    # --- each edit -------------------------------------------------------------------------

    def step(self, path: str, alternative: str | None) -> None:
        declared = alternative is None
        if not self.coordinated:
            self.edit(path)
            return
        if self.hooks.announce(path, retries=RETRIES if declared else 0):
            self.edit(path)
            return
        if alternative and alternative not in self.edited and self.hooks.announce(alternative):
            say(f"{path} is someone else's: editing {alternative} instead")
            self.edit(alternative)
            return
        say(f"{path} is someone else's: left alone")

    def edit(self, path: str) -> None:
        semantic = self.issue.get("semantic")
        if semantic and path == semantic["path"]:
            if semantic["role"] == "rename":
                self.rename(semantic)
            else:
                self.add_call(semantic)
            return
        target = self.root / path
        lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
        markers = self.plan["hot"].get(path)
        if markers:
            marker = self.rng.choice(markers)
            at = next((n for n, line in enumerate(lines) if line.rstrip("\n") == marker), None)
            if at is None:
                at = len(lines)
            entry = self.entry(path, indent=marker[: len(marker) - len(marker.lstrip())])
        else:
            at = self.rng.randint(1, max(1, len(lines)))
            entry = self.entry(path, indent="")
        lines[at:at] = entry
        target.write_text("".join(lines), encoding="utf-8")
        self.edited_now(path)

    def edited_now(self, path: str) -> None:
        self.edited.append(path)
        if self.coordinated:
            self.hooks.run(speech.POST, path)

    # --- a semantic pair's edits -----------------------------------------------------------

    def rename(self, semantic: dict[str, Any]) -> None:
        """The function renamed where it is defined and in every caller under ``src/``
        of this checkout (each announced first when coordinated: all or nothing)."""
        old, new = semantic["old"], semantic["new"]
        name = re.compile(rf"\b{re.escape(old)}\b")
        callers = sorted(
            file.relative_to(self.root).as_posix()
            for file in (self.root / "src").rglob("*.py")
            if name.search(file.read_text(encoding="utf-8"))
        )
        if semantic["path"] not in callers:
            say(f"{old} is not in {semantic['path']}: nothing to rename")
            return
        others = [caller for caller in callers if caller != semantic["path"]]
        if self.coordinated:
            for caller in others:
                if not self.hooks.announce(caller, retries=RETRIES):
                    raise Refused(f"renaming {old} needs {caller}, which stayed someone else's")
        for caller in callers:
            target = self.root / caller
            target.write_text(name.sub(new, target.read_text(encoding="utf-8")), encoding="utf-8")
            self.edited_now(caller)
        say(f"renamed {old} to {new} in {len(callers)} files")

    def add_call(self, semantic: dict[str, Any]) -> None:
        """A function that calls the service module's function by the name it has in
        this checkout now, and its check."""
        source = (self.root / semantic["target"]).read_text(encoding="utf-8")
        called = layout.defined_function(source)
        if called is None:
            say(f"no function in {semantic['target']}: nothing to call")
            return
        feature = semantic["feature"]
        target = self.root / semantic["path"]
        text = target.read_text(encoding="utf-8")
        text += "" if text.endswith("\n") else "\n"
        text += (
            f"\n\ndef {feature}(amount):  # {self.issue['title']}\n"
            f"    from {semantic['module']} import {called}\n\n"
            f"    return {called}(amount) + 1\n"
            f"\n\ndef check_{feature}():\n"
            f"    from {semantic['module']} import {called}\n\n"
            f"    assert {feature}(2) == {called}(2) + 1\n"
        )
        target.write_text(text, encoding="utf-8")
        self.edited_now(semantic["path"])
        say(f"{semantic['path']} calls {called} of {semantic['module']}")

    def entry(self, path: str, indent: str) -> list[str]:
        title = self.issue["title"]
        if path.endswith(".md"):
            return [f"- {title}\n"]
        if path.endswith(".html"):
            return [f"<!-- {title} -->\n"]
        return [f"{indent}# {title} (attempt {self.attempt})\n"]

    # --- the tests, holding a test database ---------------------------------------------

    def run_tests(self) -> None:
        """The tests, while a unit of the test resource is held: ``projektor hold``
        waits in its line, runs them with the slot in their environment and releases
        it at their exit (the runner's SIGTERM reaches it too: it is in this group)."""
        if not self.hold_tests or not self.edited:
            return
        seconds = min(float(self.issue["work_seconds"]) * TESTS_SHARE, TESTS_LONGEST_SECONDS)
        wait = str(TESTS_WAIT_SECONDS)
        tests = [sys.executable, "-c", TESTS, f"{seconds:.2f}", str(self.issue["title"])]
        command = [*projektor(), "hold", self.hold_tests, "--wait", wait, "--", *tests]
        status = subprocess.run(command, cwd=self.root, check=False).returncode
        if status == 0:
            say(f"the tests passed, {self.hold_tests} held while they ran")
        elif status == 1:
            say(f"{self.hold_tests} stayed busy for {wait} s: committing untested")
        else:
            say(f"projektor hold {self.hold_tests} failed ({status}): committing untested")

    # --- the end ---------------------------------------------------------------------------

    def start_fresh_if_redone(self) -> None:
        """An earlier attempt's commit on this branch did not land: start again from the
        newest base (what the runner checked out may predate it)."""
        base = self.plan["base"]
        mine = git(self.root, "log", "--format=%H", f"{base}..HEAD", check=False).stdout.split()
        if mine:
            say(f"this branch holds an earlier attempt ({len(mine)} commits): redoing from {base}")
            git(self.root, "reset", "-q", "--hard", base)

    def commit(self) -> int:
        git(self.root, "add", "-A")
        if not git(self.root, "diff", "--cached", "--name-only", check=False).stdout.strip():
            say("nothing to commit: every file was someone else's")
            return 0
        message = f"{self.issue['title']}\n\n{TRAILER}: {self.key}\n"
        done = git(self.root, "commit", "-q", "-m", message, check=False)
        if done.returncode != 0:
            say(f"git commit failed: {(done.stderr or done.stdout).strip()}")
            return 1
        say(f"committed {len(set(self.edited))} files for {self.issue['title']}")
        return 0

    def failing(self, seconds: float | None = None) -> set[str]:
        """What fails the check in this checkout: each failure's ``FAIL <where>``."""
        _, failures, _ = checks.run_check(self.root, seconds)
        return {checks.failure_site(line) for line in failures}

    def run_check(self, baseline: set[str]) -> int:
        """The check on the work, as a pull request's CI: 1 when it broke something."""
        passed, failures, said = checks.run_check(self.root)
        mine = [line for line in failures if checks.failure_site(line) not in baseline]
        if not mine:
            summary = said.strip().splitlines()[-1] if said.strip() else "passed"
            say(f"the check passed ({summary})" if passed else "the check failed as its base did")
            return 0
        say("the check failed:\n" + "\n".join(mine))
        return 1

    def note_ready(self) -> None:
        """When the work is ready to land: this exit."""
        where = self.plan_path.with_name(self.plan_path.name + ".ready")
        where.mkdir(exist_ok=True)
        (where / f"{self.key}.{self.attempt}").write_text(f"{time.time():.3f}\n")

    def crash(self, how: str) -> None:
        say(f"crashing as planned ({how}) on attempt {self.attempt}")
        if how == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        sys.exit(1)


def count_attempt(plan_path: Path, key: int) -> int:
    """This attempt's number at the issue (1 for the first), counted across processes."""
    where = plan_path.with_name(plan_path.name + ".attempts")
    where.mkdir(exist_ok=True)
    number = 1
    while True:
        try:
            os.close(os.open(where / f"{key}.{number}", os.O_CREAT | os.O_EXCL))
            return number
        except FileExistsError:
            number += 1


def projektor() -> list[str]:
    """The projektor command: the one on the PATH (a runner puts its interpreter's
    first), else this interpreter's module."""
    found = shutil.which("projektor")
    return [found] if found else [sys.executable, "-m", "projektor_agent"]


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"workbench agent: git {' '.join(args)} failed: {done.stderr.strip()}")
    return done


if __name__ == "__main__":
    sys.exit(main())
