"""The git side of a landing tester (docs/agents.md, "Landing green: the queue"): a
detached worktree of its own at the default branch's tip, each entry's commits
applied on it with a trailer naming the entry, and the default branch moved by
compare-and-swap, only ever to a commit whose tree passed the check."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from projektor_agent import gitops
from projektor_agent.gitops import GitError, git

TRAILER = "Projektor-Landing"
MESSAGE_FILE = "PROJEKTOR_LANDING_MSG"  # in the tester worktree's own git directory


@dataclass(frozen=True)
class Base:
    """The default branch as a batch found it."""

    repo: Path
    branch: str
    remote: bool  # it lives on origin: read from there, pushed there
    tip: str


def tester_dir(repo: Path, worktrees: Path | None, agent: str) -> Path:
    """Where ``agent`` tests batches: ``<worktrees>/<agent>-landing``, else in the
    repository's git directory (``projektor-landing-<agent>``)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", agent).strip("-")[:50] or "agent"
    if worktrees is not None:
        return worktrees / f"{slug}-landing"
    return gitops.common_dir(repo) / f"projektor-landing-{slug}"


def read_base(repo: Path) -> Base:
    """The default branch's tip: origin's, fetched, when there is that remote."""
    branch = gitops.default_branch(repo)
    remote = gitops.has_remote(repo)
    if remote:
        git("fetch", "-q", "origin", branch, cwd=repo)
        ref = f"refs/remotes/origin/{branch}"
    else:
        ref = f"refs/heads/{branch}"
    tip = git("rev-parse", "--verify", ref, cwd=repo).stdout.strip()
    return Base(repo=repo, branch=branch, remote=remote, tip=tip)


def reset(repo: Path, where: Path, commit: str) -> None:
    """``where``, the tester's worktree, made if new, at ``commit`` (detached) with
    nothing else in it: it is the tester's own, nobody's work is there."""
    if not where.exists():
        git("worktree", "prune", cwd=repo)
        where.parent.mkdir(parents=True, exist_ok=True)
        git("worktree", "add", "--detach", str(where), commit, cwd=repo)
        return
    if gitops.toplevel(where) != where.resolve() or gitops.common_dir(where) != (
        gitops.common_dir(repo)
    ):
        raise GitError(f"{where} exists and is not a worktree of {repo}: move it away")
    if (
        gitops.git_path(where, "CHERRY_PICK_HEAD").exists()
        or gitops.git_path(where, "sequencer").exists()
    ):
        git("cherry-pick", "--abort", cwd=where, check=False)
    git("checkout", "-q", "-f", "--detach", commit, cwd=where)
    git("clean", "-ffdq", cwd=where)


def known(repo: Path, commit: str) -> bool:
    return gitops.has_ref(repo, f"{commit}^{{commit}}")


def fetch_entry(base: Base, branch: str, commit: str) -> bool:
    """The entry's commit in this repository, fetched from origin's ``branch`` when it
    is not here (its runner on another machine pushed it): whether it is here now."""
    if known(base.repo, commit):
        return True
    if base.remote:
        git("fetch", "-q", "origin", f"refs/heads/{branch}", cwd=base.repo, check=False)
    return known(base.repo, commit)


def merge_base(repo: Path, one: str, other: str) -> str | None:
    result = git("merge-base", one, other, cwd=repo, check=False)
    return result.stdout.strip() or None


def landed_as(base: Base, landing: int, commit: str) -> str | None:
    """The commit on the default branch whose trailer names ``landing``: a tester moved
    the branch, then stopped before it said so. Looked for since the entry's fork."""
    fork = merge_base(base.repo, base.tip, commit) if known(base.repo, commit) else None
    span = f"{fork}..{base.tip}" if fork else base.tip
    pattern = f"^{TRAILER}: {landing}$"
    found = git("log", "-1", "--format=%H", f"--grep={pattern}", span, cwd=base.repo)
    return found.stdout.strip() or None


def apply(base: Base, where: Path, landing: int, commit: str) -> list[str] | None:
    """The entry's own commits (``merge-base(tip, commit)..commit``, merges left out as
    a rebase does) cherry-picked onto ``where``'s HEAD, the last one given the trailer
    ``Projektor-Landing: <landing>``: None when applied (nothing to apply is applied),
    else the files that conflicted (the cherry-pick aborted, HEAD as it was)."""
    fork = merge_base(base.repo, base.tip, commit)
    if fork is None:
        return [f"(no history in common with {base.branch})"]
    listed = git("rev-list", "--reverse", "--no-merges", f"{fork}..{commit}", cwd=where).stdout
    commits = listed.split()
    if not commits:
        return None  # already on the default branch: its tree is the one before it
    picked = git(
        "cherry-pick", "--allow-empty", "--keep-redundant-commits", *commits, cwd=where, check=False
    )
    if picked.returncode != 0:
        conflicts = gitops.unmerged(where)
        git("cherry-pick", "--abort", cwd=where, check=False)
        if conflicts:
            return conflicts
        detail = (picked.stderr or picked.stdout).strip().splitlines()
        raise GitError(f"git cherry-pick failed in {where}: {detail[-1] if detail else '?'}")
    add_trailer(where, landing)
    return None


def add_trailer(where: Path, landing: int) -> None:
    message = git("log", "-1", "--format=%B", "HEAD", cwd=where).stdout
    path = gitops.git_path(where, MESSAGE_FILE)
    path.write_text(message, encoding="utf-8")
    trailer = f"{TRAILER}: {landing}"
    git("interpret-trailers", "--in-place", "--trailer", trailer, str(path), cwd=where)
    git(
        "commit",
        "-q",
        "--amend",
        "--no-verify",
        "--allow-empty",
        "--cleanup=whitespace",
        "-F",
        str(path),
        cwd=where,
    )
    path.unlink()


def move(base: Base, new: str) -> str | None:
    """The default branch moved from the batch's tip to ``new`` (a descendant whose
    tree passed the check), compare-and-swap: None when done, else why not."""
    if base.remote:
        return gitops.push(base.repo, base.branch, new, old=base.tip)
    return gitops.fast_forward(base.repo, base.branch, base.tip, new)
