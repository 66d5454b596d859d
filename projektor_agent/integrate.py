"""``projektor run --integrate``: land the issue's branch on the default branch while
the unit still holds its lease and claims (docs/agents.md, "Integration under claim").

One integration at a time per project: a run locks the project's primary worktree
(``POST /runs/`` with ``primary_worktree``); then the branch is rebased onto the
default branch, verified again if the rebase moved it, and the default branch is
fast-forwarded to it (pushed, when the repository has a remote). Without a primary
worktree the server cannot serialise integrations: the runner says so and relies on
git alone (a compare-and-swap of the branch, retried), which loses no commit either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from projektor_agent import gitops, handin
from projektor_agent.context import RunContext, Unit
from projektor_agent.errors import UsageError
from projektor_agent.output import say, warn
from projektor_agent.supervise import Watch

ATTEMPTS = 5  # the default branch moved between the rebase and the landing: again


@dataclass
class Landed:
    branch: str  # the default branch
    commit: str  # where it is now: the work on top
    verification: str | None  # the verification again, when the rebase moved the branch


class Failed(Exception):
    """The branch could not be landed; the message says why (for the give-back)."""


def prepare(context: RunContext, unit: Unit) -> None:
    """Before the integration run: ``unit``'s branch (its agent exited 0 and passed
    --verify) holds all of its work."""
    if context.repo is None or unit.workdir is None or unit.branch is None:
        raise UsageError("--integrate needs --worktrees: the issue's branch is what it lands")
    message = f"projektor: work of {context.agent} on issue {unit.id}"
    if gitops.commit_all(unit.workdir, message):
        say(f"issue {unit.id}: committed what the agent left uncommitted, to land it")


def land(
    context: RunContext, unit: Unit, integration: dict[str, Any] | None, watch: Watch
) -> Landed:
    """Land ``unit``'s branch, under ``integration`` (the run on the project's primary
    worktree, which the caller finishes) or, without one, by git alone."""
    repo, workdir = context.repo, unit.workdir
    if repo is None or workdir is None or unit.branch is None:
        raise UsageError("--integrate needs --worktrees: the issue's branch is what it lands")
    default = gitops.default_branch(repo)
    if integration is None:
        warn(
            f"project {unit.issue.get('project')} has no primary worktree: integrations are "
            "not serialised by the server (set one on the project); landing by git alone"
        )
    remote = gitops.has_remote(repo)
    why_not: str | None = None
    verification: str | None = None
    for _attempt in range(ATTEMPTS):
        if remote:
            gitops.git("fetch", "-q", "origin", default, cwd=repo)
            target = gitops.git("rev-parse", f"refs/remotes/origin/{default}", cwd=repo)
        else:
            target = gitops.git("rev-parse", f"refs/heads/{default}", cwd=repo)
        old = target.stdout.strip()
        before = gitops.head(workdir)
        conflicts = gitops.rebase(workdir, old)
        if conflicts:
            raise Failed(
                f"rebasing {unit.branch} onto {default} conflicts in {', '.join(conflicts)}; "
                "the branch is kept as it was, to be brought up to date by hand"
            )
        new = gitops.head(workdir)
        if new != before and context.options.verify:
            passed, verification = handin.verify(context.options.verify, unit)
            if not passed:
                raise Failed(
                    f"after the rebase onto {default}, the verification failed: {verification}"
                )
        if watch.lost:
            raise Failed("the work was taken before it landed")
        if remote:
            why_not = gitops.push(repo, default, new)
        else:
            why_not = gitops.fast_forward(repo, default, old, new)
        if why_not is None:
            say(f"issue {unit.id}: landed {new[:12]} on {default}")
            return Landed(branch=default, commit=new, verification=verification)
        if not remote and "moved meanwhile" not in why_not:
            raise Failed(f"could not fast-forward {default}: {why_not}")
        say(f"issue {unit.id}: {why_not}; rebasing again")
    raise Failed(f"not landed after {ATTEMPTS} attempts: {why_not}")
