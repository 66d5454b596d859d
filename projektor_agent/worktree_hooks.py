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

``extensions.worktreeConfig`` stays set in the runner's own worktrees. In a checkout the
runner did not create, what it found is noted before arming (``found``) and given back
after disarming (``leave_as_found``): the worktree's ``config.worktree`` removed when it
was not there and is left empty, and ``extensions.worktreeConfig`` put back as it was
when the runner set it, unless another worktree of the repository is armed through it.
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
WORKTREE_CONFIG = "config.worktree"  # in the worktree's own git directory
EXTENSION = "extensions.worktreeConfig"
TRUE = ("true", "yes", "on", "1")


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
        # left set in the runner's own worktrees (another runner's worktree may be armed
        # through it meanwhile); put back in a checkout it did not create (leave_as_found).
        gitops.git("config", EXTENSION, "true", cwd=workdir)
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


def found(workdir: Path) -> dict[str, object]:
    """What arming changes in the worktree's configuration, as it is now."""
    extension = gitops.git("config", "--local", "--get", EXTENSION, cwd=workdir, check=False)
    return {
        "extension": extension.stdout.strip() if extension.returncode == 0 else None,
        "worktree_config": (own_git_dir(workdir) / WORKTREE_CONFIG).exists(),
    }


def leave_as_found(workdir: Path, before: dict[str, object], *, shared: bool) -> None:
    """The worktree's configuration as it was ``found`` (``before``), once disarmed: its
    ``config.worktree`` removed when it was not there and holds nothing now, and
    ``extensions.worktreeConfig`` put back when the runner set it, unless ``shared``
    (another worktree of the repository is armed through it)."""
    own = own_git_dir(workdir) / WORKTREE_CONFIG
    if not before.get("worktree_config") and own.is_file():
        entries = gitops.git("config", "--file", str(own), "--list", cwd=workdir, check=False)
        if entries.returncode == 0 and not entries.stdout.strip():
            own.unlink()
    previous = before.get("extension")
    if shared or (isinstance(previous, str) and previous.lower() in TRUE):
        return  # not the runner's to put back
    now = gitops.git("config", "--local", "--get", EXTENSION, cwd=workdir, check=False)
    if now.returncode != 0 or now.stdout.strip() != "true":
        return  # not as the runner set it: someone else's since
    if previous is None:
        gitops.git("config", "--local", "--unset", EXTENSION, cwd=workdir)
    else:
        gitops.git("config", "--local", EXTENSION, str(previous), cwd=workdir)


def others_armed(workdir: Path) -> bool:
    """Another worktree of ``workdir``'s repository is armed (or was, by a runner killed
    there): it relies on the repository's shared settings."""
    own = own_git_dir(workdir).resolve()
    common = gitops.common_dir(workdir)
    linked = common / "worktrees"
    git_dirs = [common, *(sorted(linked.iterdir()) if linked.is_dir() else [])]
    return any(
        git_dir.resolve() != own and (git_dir / HOOKS_DIR / "pre-commit").is_file()
        for git_dir in git_dirs
    )


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
