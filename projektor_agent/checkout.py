"""The agent's checkout armed for a unit of ``projektor run``: the issue's text, the
pre-commit guard, the hooks, the agent's environment (docs/agents.md, "The agent
command")."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from projektor_agent import gitops, hook_install, resources, worktree_hooks
from projektor_agent.context import RunContext, Unit
from projektor_agent.errors import UsageError
from projektor_agent.output import say, warn

RUNNER_DIR = ".projektor"
EXCLUDES = ("/.projektor/",)
FOUND = "projektor-found.json"  # in the worktree's own git directory, while it is armed
FOUND_MARK = "What projektor run found in a checkout it did not create, to leave it so"


def arm(context: RunContext, unit: Unit) -> None:
    """``unit``'s checkout armed: the issue's text for the agent, the guard, the hooks,
    the environment (``unit.env``)."""
    workdir = unit.workdir
    assert workdir is not None
    noted = False
    if context.worktrees is None and gitops.toplevel(workdir) is not None:
        try:
            put_back(workdir)  # a killed runner's, first: what it found is what we find
            noted = note_found(workdir)
        except (gitops.GitError, OSError, ValueError) as error:
            warn(f"what {workdir} holds could not be noted to leave it so: {error}")
    (workdir / RUNNER_DIR).mkdir(exist_ok=True)
    (workdir / RUNNER_DIR / "issue.md").write_text(issue_text(unit.issue), encoding="utf-8")
    if gitops.toplevel(workdir) is not None:
        gitops.exclude(workdir, *EXCLUDES)
        try:
            worktree_hooks.arm(workdir, guard_command())  # this worktree's alone, until disarm
        except (gitops.GitError, OSError) as error:
            warn(f"the pre-commit guard could not be armed in {workdir}: {error}")
    for harness in context.options.hooks:
        installed = hook_install.install(harness, workdir)
        if installed.added and context.worktrees is None:
            unit.hooks_added.append(harness)  # a checkout not the runner's: taken out at the end
    if noted:
        note_excluded(workdir)
    config = context.client.config
    unit.env = {
        **os.environ,
        "PROJEKTOR_URL": config.url,
        "PROJEKTOR_API_KEY": config.api_key,
        "PROJEKTOR_AGENT": context.agent,
        "PROJEKTOR_SESSION": str(unit.session),
        "PROJEKTOR_ISSUE": str(unit.id),
        "PROJEKTOR_FENCE": "" if unit.fence is None else str(unit.fence),
        "PROJEKTOR_RUN": str((unit.run or {}).get("id", "")),
        "PROJEKTOR_WORKTREE": str(workdir),  # the root the hook claims paths under
        **resources.environment(unit.holds),  # the slots of what --hold holds for it
    }
    if unit.branch is not None and context.repo is not None:
        # The hook's fresh base: what a claimed path is compared with and rebased onto.
        unit.env["PROJEKTOR_BASE"] = gitops.upstream(context.repo, str(unit.base))


def disarm(unit: Unit) -> None:
    """The guard armed by ``arm`` removed, the worktree's hooks as they were, and in a
    checkout the runner did not create, the agent CLIs' hooks it added taken out again
    and the rest of what it added (``leave_as_found``): at the end of every unit,
    whatever its end (invariant 19 (A runner's child never outlives its runner's right
    to work): what the runner installed is removed)."""
    workdir = unit.workdir
    if workdir is None:
        return
    try:
        worktree_hooks.disarm(workdir)
    except (gitops.GitError, OSError) as error:
        warn(f"issue {unit.id}: could not remove the guard from {workdir}: {error}")
    while unit.hooks_added:  # the agent CLIs' hooks this unit added to a checkout of others
        harness = unit.hooks_added.pop()
        try:
            hook_install.uninstall(harness, workdir)
        except (gitops.GitError, OSError, UsageError) as error:
            warn(f"issue {unit.id}: could not remove the {harness} hooks from {workdir}: {error}")
    try:
        leave_as_found(workdir)
    except (gitops.GitError, OSError, ValueError) as error:
        warn(f"issue {unit.id}: could not leave {workdir} as it was found: {error}")


# --- a checkout the runner did not create, left as found ------------------------------------
#
# Before arming such a checkout the runner notes what it finds there, in the worktree's own
# git directory (FOUND): what ``.projektor/`` held, the repository's ``info/exclude``, the
# worktree's ``config.worktree`` and ``extensions.worktreeConfig``. When the unit ends, or
# when the next runner there finds the note of one that was killed, what the runner added
# is taken out again, and only that: the files written in ``.projektor/`` (the directory
# too when it was not there), the lines it added to ``info/exclude`` (the file and its
# folder when they were not there), ``config.worktree`` when it was not there and is empty,
# and ``extensions.worktreeConfig`` when the runner set it. The repository's shared files
# (``info/exclude``, its config) are left while another worktree of it is armed, as that
# one relies on them.


def found_path(workdir: Path) -> Path:
    return worktree_hooks.own_git_dir(workdir) / FOUND


def note_found(workdir: Path) -> bool:
    """What ``workdir`` holds that arming changes, noted (``FOUND``); False when a note
    is there still (one that could not be given back, or not the runner's)."""
    path = found_path(workdir)
    if path.exists():
        return False
    runner_dir = workdir / RUNNER_DIR
    issue = runner_dir / "issue.md"
    exclude = gitops.git_path(workdir, "info/exclude")
    before = exclude.read_text(encoding="utf-8") if exclude.is_file() else None
    present = (before or "").splitlines()
    found: dict[str, Any] = {
        "mark": FOUND_MARK,
        "runner_dir": runner_dir.is_dir(),
        "runner_files": runner_files(runner_dir),
        "issue": issue.read_text(encoding="utf-8") if issue.is_file() else None,
        "info_dir": exclude.parent.is_dir(),
        "exclude": before,
        "excluded": [line for line in EXCLUDES if line not in present],  # arm adds them
        **worktree_hooks.found(workdir),
    }
    write_atomically(path, json.dumps(found, indent=1) + "\n")
    return True


def note_excluded(workdir: Path) -> None:
    """The lines arming added to ``info/exclude`` (the agent CLIs' hook files too),
    added to the note."""
    path = found_path(workdir)
    try:
        found = read_found(path)
        if found is None:
            return
        exclude = gitops.git_path(workdir, "info/exclude")
        now = exclude.read_text(encoding="utf-8").splitlines() if exclude.is_file() else []
        before = set((found["exclude"] or "").splitlines())
        added = [line for line in now if line.strip() and line not in before]
        found["excluded"] = sorted(set(found["excluded"]) | set(added))
        write_atomically(path, json.dumps(found, indent=1) + "\n")
    except (gitops.GitError, OSError, ValueError) as error:
        warn(f"what arming added to {workdir} could not be noted: {error}")


def put_back(workdir: Path) -> None:
    """What a killed runner left armed in ``workdir`` taken out: its guard, and what it
    noted it found there, given back."""
    worktree_hooks.disarm(workdir)
    leave_as_found(workdir)


def leave_as_found(workdir: Path) -> bool:
    """What the runner added to ``workdir`` since it noted what it found there taken
    out again (its guard already removed); False when there is no note."""
    if gitops.toplevel(workdir) is None:
        return False
    path = found_path(workdir)
    found = read_found(path)
    if found is None or worktree_hooks.armed_hooks(workdir) is not None:
        return False  # no note, or the guard still armed: left for the next runner there
    shared = worktree_hooks.others_armed(workdir)
    leave_runner_dir(workdir / RUNNER_DIR, found)
    if not shared:
        leave_exclude(gitops.git_path(workdir, "info/exclude"), found)
    worktree_hooks.leave_as_found(workdir, found, shared=shared)
    path.unlink()
    return True


def read_found(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    found = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(found, dict) or found.get("mark") != FOUND_MARK:
        return None  # not the runner's: left alone
    return found


def runner_files(runner_dir: Path) -> list[str]:
    """What is in ``runner_dir``, relative to it, deepest last."""
    if not runner_dir.is_dir() or runner_dir.is_symlink():
        return []
    return sorted(path.relative_to(runner_dir).as_posix() for path in runner_dir.rglob("*"))


def leave_runner_dir(runner_dir: Path, found: dict[str, Any]) -> None:
    """What was written in ``.projektor/`` removed (the issue's text of before given
    back), the directory too when it was not there."""
    if not runner_dir.is_dir() or runner_dir.is_symlink():
        return
    kept = set(found["runner_files"])
    for name in reversed(runner_files(runner_dir)):  # a folder's files before the folder
        if name in kept:
            continue
        path = runner_dir / name
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()):
                path.rmdir()
        else:
            path.unlink()
    if found["issue"] is not None:
        (runner_dir / "issue.md").write_text(found["issue"], encoding="utf-8")
    if not found["runner_dir"] and not any(runner_dir.iterdir()):
        runner_dir.rmdir()


def leave_exclude(exclude: Path, found: dict[str, Any]) -> None:
    """The lines the runner added to ``info/exclude`` taken out (a user's own kept, the
    same line too when it was there before); the file as it was when only they were
    added, and no file (nor folder) when there was none."""
    if not exclude.is_file():
        return
    added, before = set(found["excluded"]), found["exclude"]
    text = exclude.read_text(encoding="utf-8")

    def only_added(part: str) -> bool:
        return all(not line.strip() or line in added for line in part.splitlines())

    if before is not None and text.startswith(before) and only_added(text[len(before) :]):
        if text != before:
            write_atomically(exclude, before)
        return
    if before is None and only_added(text):
        exclude.unlink()
        if not found["info_dir"] and not any(exclude.parent.iterdir()):
            exclude.parent.rmdir()
        return
    had = set((before or "").splitlines())
    lines = text.splitlines(keepends=True)
    kept = [line for line in lines if line.rstrip("\r\n") not in added - had]
    if kept != lines:
        write_atomically(exclude, "".join(kept))


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def uncommitted(workdir: Path) -> str | None:
    """A digest of what is uncommitted in ``workdir`` (its HEAD aside: the agent's own
    commits do not count); None outside a git work tree."""
    if gitops.toplevel(workdir) != workdir.resolve() or not gitops.has_ref(workdir, "HEAD"):
        return None
    status = gitops.git("status", "--porcelain", "--untracked-files=all", cwd=workdir).stdout
    diff = gitops.git("diff", "HEAD", "--no-color", "--no-ext-diff", cwd=workdir).stdout
    return hashlib.sha256(f"{status}\0{diff}".encode()).hexdigest()


def set_aside(context: RunContext, unit: Unit, before: str | None, why: str) -> str | None:
    """A stopped agent's uncommitted work in a checkout the runner did not create, set
    aside with ``git stash`` (untracked files too) so that the next unit there starts
    clean; only when the unit changed what is uncommitted there since ``before`` (a
    user's own edits that were there before and stayed as they were are left alone).
    Returns where it went, a sentence for the issue's message, or None."""
    workdir = unit.workdir
    if workdir is None or context.worktrees is not None or before is None:
        return None  # the runner's own worktrees keep it on the issue's branch instead
    try:
        if uncommitted(workdir) in (None, before):
            return None
        reason = why.splitlines()[0][:120] if why else "stopped"
        message = f"projektor: issue {unit.id}, uncommitted work of {context.agent} ({reason})"
        gitops.git("stash", "push", "--include-untracked", "-q", "-m", message, cwd=workdir)
        stash = gitops.git("rev-parse", "stash@{0}", cwd=workdir).stdout.strip()
    except (gitops.GitError, OSError) as error:
        warn(f"issue {unit.id}: could not set the uncommitted work aside: {error}")
        return None
    where = (
        f"its uncommitted work in {workdir} was set aside with git stash "
        f'("{message}", commit {stash[:12]}): `git stash apply {stash[:12]}` there brings it back'
    )
    say(f"issue {unit.id}: {where}")
    return where


def issue_text(issue: dict[str, Any]) -> str:
    lines = [f"# Issue {issue['id']}: {issue.get('title', '')}", ""]
    lines += [str(issue.get("description") or "").rstrip(), ""]
    if issue.get("paths"):
        lines += ["Expected paths: " + ", ".join(issue["paths"]), ""]
    lines += [
        "---",
        "Written by `projektor run`. To shape the hand-in, write .projektor/report.json:",
        '{"summary": "what changed", "verification": "how it was checked", "pr_link": "…"}',
        "",
    ]
    return "\n".join(lines)


def guard_command() -> list[str]:
    """``projektor guard pre-commit``, run by this Python from where this package is
    (a directory, or the zipapp ``/agent/projektor``), never from the checkout the
    agent works in (which may hold a package of the same name)."""
    import projektor_agent

    where = str(Path(projektor_agent.__file__).resolve().parent.parent)
    program = (
        f"import sys; sys.path.insert(0, {where!r}); from projektor_agent.cli import main; "
        "sys.exit(main(['guard', 'pre-commit']))"
    )
    return [sys.executable, "-I", "-c", program]
