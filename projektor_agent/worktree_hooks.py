"""The pre-commit guard armed in one worktree only, and disarmed when the unit ends
(docs/agents.md, "Run an agent", step 3; invariant 19 (A runner's child never outlives
its runner's right to work): what the runner installed is removed when it is done).

Git shares one hooks directory among a repository's worktrees, so the guard is never
written there: the worktree gets hooks of its own through its own configuration
(``extensions.worktreeConfig`` and ``git config --worktree core.hooksPath``), a
directory in the worktree's private git directory. Its ``pre-commit`` runs the guard
(``projektor guard pre-commit``, by the runner's own command)
(under a runner only: ``PROJEKTOR_ISSUE`` set) and then the pre-commit hook the
worktree had before, if any; every other hook of before is forwarded to as it was. So
a user's own hooks still run, and are never replaced or moved.

Disarming puts the worktree's ``core.hooksPath`` back as it was (unset, or the value
it had, kept in ``previous-hooks-path``) and removes the directory. A directory left by
a killed runner is recognised by its name and its marker, and disarmed the same way
before the next arming: never taken for a user's hooks.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from projektor_agent import gitops

HOOKS_DIR = "projektor-hooks"  # in the worktree's own git directory
MARK = "Armed by projektor run for this worktree only"
PREVIOUS = "previous-hooks-path"  # the worktree's own core.hooksPath before, if it had one


def own_git_dir(workdir: Path) -> Path:
    out = gitops.git("rev-parse", "--absolute-git-dir", cwd=workdir).stdout
    return Path(out.strip())


def worktree_setting(workdir: Path) -> str | None:
    """The worktree's own core.hooksPath (its config.worktree), if set."""
    result = gitops.git("config", "--worktree", "--get", "core.hooksPath", cwd=workdir, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def armed_hooks(workdir: Path) -> Path | None:
    """Our hooks directory, when the worktree is armed with it (now or by a killed runner)."""
    hooks = own_git_dir(workdir) / HOOKS_DIR
    if worktree_setting(workdir) != str(hooks):
        return None
    pre_commit = hooks / "pre-commit"
    if not pre_commit.is_file() or MARK not in pre_commit.read_text(errors="replace"):
        return None
    return hooks


def arm(workdir: Path, guard: list[str]) -> Path:
    """The guard (the command line that runs it) armed in ``workdir`` alone; returns
    the hooks directory used."""
    disarm(workdir)  # a killed runner's, first: what it found is what we find
    before = gitops.git_path(workdir, "hooks").resolve()  # the hooks that ran until now
    previous = worktree_setting(workdir)
    hooks = own_git_dir(workdir) / HOOKS_DIR
    shutil.rmtree(hooks, ignore_errors=True)
    hooks.mkdir(parents=True)
    if previous is not None:
        (hooks / PREVIOUS).write_text(previous + "\n", encoding="utf-8")
    write_hook(hooks / "pre-commit", pre_commit(guard, before / "pre-commit"))
    for hook in sorted(before.iterdir()) if before.is_dir() else []:
        if hook.name != "pre-commit" and runnable(hook):
            write_hook(hooks / hook.name, f'exec {shlex.quote(str(hook))} "$@"\n')
    extension = ("config", "--bool", "--get", "extensions.worktreeConfig")
    if gitops.git(*extension, cwd=workdir, check=False).stdout.strip() != "true":
        # Read by git only to find config.worktree files: inert for everything else, and
        # left set (another runner's worktree may be armed through it meanwhile).
        gitops.git("config", "extensions.worktreeConfig", "true", cwd=workdir)
    gitops.git("config", "--worktree", "core.hooksPath", str(hooks), cwd=workdir)
    return hooks


def disarm(workdir: Path) -> bool:
    """The worktree's hooks as they were before it was armed; False when it was not."""
    if gitops.toplevel(workdir) is None:
        return False
    hooks = armed_hooks(workdir)
    if hooks is None:
        return False
    previous_file = hooks / PREVIOUS
    if previous_file.exists():
        previous = previous_file.read_text(encoding="utf-8").strip()
        gitops.git("config", "--worktree", "core.hooksPath", previous, cwd=workdir)
    else:
        gitops.git("config", "--worktree", "--unset", "core.hooksPath", cwd=workdir)
    shutil.rmtree(hooks, ignore_errors=True)
    return True


def pre_commit(guard: list[str], theirs: Path) -> str:
    command, their_hook = shlex.join(guard), shlex.quote(str(theirs))
    return (
        "# Under a runner only (PROJEKTOR_ISSUE set): the guard, then the hook of before.\n"
        f'if [ -n "$PROJEKTOR_ISSUE" ]; then {command} || exit 1; fi\n'
        f'if [ -x {their_hook} ]; then exec {their_hook} "$@"; fi\n'
    )


def write_hook(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n# {MARK}: removed when its unit ends.\n{body}", encoding="utf-8")
    path.chmod(0o755)


def runnable(hook: Path) -> bool:
    return hook.is_file() and not hook.name.endswith(".sample") and os.access(hook, os.X_OK)
