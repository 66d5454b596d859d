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

from projektor_agent import gitops
from projektor_agent.errors import UsageError
from projektor_agent.output import say, warn

ATTEMPTS = 5  # the default branch moved between the rebase and the landing: again


@dataclass
class Landed:
    branch: str  # the default branch
    commit: str  # where it is now: the work on top


class Failed(Exception):
    """The branch could not be landed; the message says why (for the give-back)."""


def integrate(work: Any) -> Landed:
    """Land ``work``'s branch (a UnitWork whose agent exited 0 and passed --verify).
    The integration run, if one was dispatched, is left on ``work.integration``
    for the caller to finish."""
    unit, repo = work.unit, work.runner.repo
    if repo is None or unit.workdir is None or unit.branch is None:
        raise UsageError("--integrate needs --worktrees: the issue's branch is what it lands")
    default = gitops.default_branch(repo)
    message = f"projektor: work of {work.runner.agent} on issue {unit.id}"
    if gitops.commit_all(unit.workdir, message):
        say(f"issue {unit.id}: committed what the agent left uncommitted, to land it")
    work.integration = work.dispatch(primary_worktree=True)
    if work.integration is None:
        warn(
            f"project {unit.issue.get('project')} has no primary worktree: integrations are "
            "not serialised by the server (set one on the project); landing by git alone"
        )
    remote = gitops.has_remote(repo)
    why_not: str | None = None
    for _attempt in range(ATTEMPTS):
        if remote:
            gitops.git("fetch", "-q", "origin", default, cwd=repo)
            target = gitops.git("rev-parse", f"refs/remotes/origin/{default}", cwd=repo)
        else:
            target = gitops.git("rev-parse", f"refs/heads/{default}", cwd=repo)
        old = target.stdout.strip()
        before = gitops.head(unit.workdir)
        conflicts = gitops.rebase(unit.workdir, old)
        if conflicts:
            raise Failed(
                f"rebasing {unit.branch} onto {default} conflicts in {', '.join(conflicts)}; "
                "the branch is kept as it was, to be brought up to date by hand"
            )
        new = gitops.head(unit.workdir)
        if new != before and work.args.verify:
            passed, verification = work.verify()
            work.verification = verification
            if not passed:
                raise Failed(
                    f"after the rebase onto {default}, the verification failed: {verification}"
                )
        if work.watch.lost:
            raise Failed("the work was taken before it landed")
        if remote:
            why_not = gitops.push(repo, default, new)
        else:
            why_not = gitops.fast_forward(repo, default, old, new)
        if why_not is None:
            say(f"issue {unit.id}: landed {new[:12]} on {default}")
            return Landed(branch=default, commit=new)
        if not remote and "moved meanwhile" not in why_not:
            raise Failed(f"could not fast-forward {default}: {why_not}")
        say(f"issue {unit.id}: {why_not}; rebasing again")
    raise Failed(f"not landed after {ATTEMPTS} attempts: {why_not}")
