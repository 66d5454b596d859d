"""The agent's checkout armed for a unit of ``projektor run``: the issue's text, the
pre-commit guard, the hooks, the agent's environment (docs/agents.md, "The agent
command")."""

from __future__ import annotations

import os
from typing import Any

from projektor_agent import gitops, worktree_hooks
from projektor_agent.errors import UsageError
from projektor_agent.output import warn

RUNNER_DIR = ".projektor"
EXCLUDES = ("/.projektor/",)


def arm(work: Any) -> None:
    """``work``'s checkout armed: the issue's text for the agent, the guard, the hooks,
    the environment (``work`` is a UnitWork)."""
    unit, workdir = work.unit, work.unit.workdir
    assert workdir is not None
    (workdir / RUNNER_DIR).mkdir(exist_ok=True)
    (workdir / RUNNER_DIR / "issue.md").write_text(issue_text(unit.issue), encoding="utf-8")
    if gitops.toplevel(workdir) is not None:
        gitops.exclude(workdir, *EXCLUDES)
        try:
            worktree_hooks.arm(workdir, guard_script())  # this worktree's alone, until disarm
        except (gitops.GitError, OSError) as error:
            warn(f"the pre-commit guard could not be armed in {workdir}: {error}")
    if work.args.hooks == "claude-code":
        from projektor_agent import hook

        hook.install_claude_code(workdir)
    config = work.client.config
    unit.env = {
        **os.environ,
        "PROJEKTOR_URL": config.url,
        "PROJEKTOR_API_KEY": config.api_key,
        "PROJEKTOR_AGENT": work.runner.agent,
        "PROJEKTOR_SESSION": str(unit.session),
        "PROJEKTOR_ISSUE": str(unit.id),
        "PROJEKTOR_FENCE": "" if unit.fence is None else str(unit.fence),
        "PROJEKTOR_RUN": str((unit.run or {}).get("id", "")),
        "PROJEKTOR_WORKTREE": str(workdir),  # the root the hook claims paths under
    }
    if unit.branch is not None and work.runner.repo is not None:
        # The hook's fresh base: what a claimed path is compared with and rebased onto.
        unit.env["PROJEKTOR_BASE"] = gitops.upstream(work.runner.repo, str(unit.base))


def disarm(work: Any) -> None:
    """The guard armed by ``arm`` removed, the worktree's hooks as they were: at the
    end of every unit, whatever its end (invariant 19 (A runner's child never outlives
    its runner's right to work): what the runner installed is removed)."""
    workdir = work.unit.workdir
    if workdir is None:
        return
    try:
        worktree_hooks.disarm(workdir)
    except (gitops.GitError, OSError) as error:
        warn(f"issue {work.unit.id}: could not remove the guard from {workdir}: {error}")


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


def guard_script() -> bytes:
    """The guard module's own source: a standalone hook (works from the zipapp too)."""
    import pkgutil

    data = pkgutil.get_data("projektor_agent", "guard.py")
    if data is None:
        raise UsageError("the guard's source is missing from this installation")
    return data
