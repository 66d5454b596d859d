"""The agent's checkout armed for a unit of ``projektor run``: the issue's text, the
pre-commit guard, the hooks, the agent's environment (docs/agents.md, "The agent
command")."""

from __future__ import annotations

import hashlib
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


def arm(context: RunContext, unit: Unit) -> None:
    """``unit``'s checkout armed: the issue's text for the agent, the guard, the hooks,
    the environment (``unit.env``)."""
    workdir = unit.workdir
    assert workdir is not None
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
    """The guard armed by ``arm`` removed, the worktree's hooks as they were, and the
    agent CLIs' hooks it added to a checkout the runner did not create taken out again:
    at the end of every unit, whatever its end (invariant 19 (A runner's child never
    outlives its runner's right to work): what the runner installed is removed)."""
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
