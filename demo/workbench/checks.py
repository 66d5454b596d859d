"""The workbench's check (``check_script``) run in a checkout (``run_check``) and over
every commit a run put on ``main`` (``red_commits``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

try:
    from demo.workbench.check_script import CHECK, CHECK_SECONDS_VARIABLE, FAILED
    from demo.workbench.repository import BASE, git
except ImportError:  # beside agent.py run as a script: its folder is on the path
    from check_script import CHECK, CHECK_SECONDS_VARIABLE, FAILED  # type: ignore[no-redef]
    from repository import BASE, git  # type: ignore[no-redef]

# --- the check, run -------------------------------------------------------------------------


def run_check(
    checkout: Path, seconds: float | None = None, python: str | None = None
) -> tuple[bool, list[str], str]:
    """The checkout's ``check.py``: passed, its failures' lines, and all it said.
    ``seconds``: its sleep instead of the one it was written with."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if seconds is not None:
        env[CHECK_SECONDS_VARIABLE] = f"{seconds:g}"
    done = subprocess.run(
        [python or sys.executable, CHECK],
        cwd=checkout,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    said = done.stdout + done.stderr
    failures = [line for line in said.splitlines() if line.startswith(FAILED)]
    if done.returncode != 0 and not failures:
        failures = [f"{FAILED}check.py: exited with status {done.returncode}"]
    return done.returncode == 0, failures, said


def red_commits(repo: Path, base: str, branch: str = BASE) -> list[dict[str, Any]]:
    """Every commit ``base..branch`` whose tree fails its check (run at 0 seconds), oldest
    first: ``{"commit", "subject", "failures", "new"}``, ``new`` the failures the commit
    before it did not have (a commit that broke something, rather than one that landed
    on a branch already broken). Each tree is checked out in a temporary detached
    worktree, removed afterwards."""
    commits = git(repo, "rev-list", "--reverse", "--first-parent", f"{base}..{branch}").split()
    red: list[dict[str, Any]] = []
    if not commits:
        return red
    where = Path(tempfile.mkdtemp(prefix="workbench-audit-"))
    checkout = where / "tree"
    git(repo, "worktree", "add", "-q", "--detach", str(checkout), commits[0])
    before: set[str] = set()
    try:
        for commit in commits:
            git(checkout, "checkout", "-q", "--detach", "--force", commit)
            passed, failures, _ = run_check(checkout, seconds=0)
            failing = {failure_site(line) for line in failures}
            if not passed:
                subject = git(repo, "log", "-1", "--format=%s", commit).strip()
                new = [line for line in failures if failure_site(line) not in before]
                red.append({"commit": commit, "subject": subject, "failures": failures, "new": new})
            before = failing
    finally:
        git(repo, "worktree", "remove", "--force", str(checkout))
        shutil.rmtree(where, ignore_errors=True)
    return red


def failure_site(line: str) -> str:
    """``FAIL app.x.check_y: ImportError: …`` → ``FAIL app.x.check_y``: the same failure
    whichever tree it was found in."""
    return line.split(": ", 1)[0]
