"""The git side of a run: the agent's own worktree, a branch per issue from the default
branch, the runner's exclude lines, and the branch's commits."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

from projektor_agent.errors import UsageError
from projektor_agent.output import say

BRANCH_PREFIX = "projektor/"
SLUG_LENGTH = 40


class GitError(UsageError):
    """A git step failed: something to fix in the checkout (exit 2)."""


def git(*args: str, cwd: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    # No optional locks: the runner's looks (status) never make the agent's own git
    # commands fail on a held index.lock.
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
    try:
        result = subprocess.run(
            ["git", *args], cwd=str(cwd), env=env, capture_output=True, text=True, check=False
        )
    except OSError as error:
        raise GitError(f"cannot run git: {error}") from None
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise GitError(f"git {' '.join(args)} failed in {cwd}: {detail[-1] if detail else '?'}")
    return result


def toplevel(path: str | Path) -> Path | None:
    """The work tree that holds ``path``, or None outside any git repository."""
    if not Path(path).is_dir():
        return None
    result = git("rev-parse", "--show-toplevel", cwd=path, check=False)
    return Path(result.stdout.strip()) if result.returncode == 0 else None


def common_dir(path: str | Path) -> Path:
    out = git("rev-parse", "--git-common-dir", cwd=path).stdout
    return (Path(path) / out.strip()).resolve()  # git answers relative to ``path``


def git_path(path: str | Path, name: str) -> Path:
    """Where git keeps ``name`` for this work tree (hooks honour core.hooksPath)."""
    out = git("rev-parse", "--git-path", name, cwd=path).stdout
    return Path(path) / out.strip()


def has_ref(path: str | Path, ref: str) -> bool:
    return git("rev-parse", "--verify", "--quiet", ref, cwd=path, check=False).returncode == 0


def default_branch(repo: Path) -> str:
    """The repository's default branch: the remote's HEAD, else init.defaultBranch,
    main or master when they exist, else the branch checked out in ``repo``."""
    remote = git("symbolic-ref", "--short", "refs/remotes/origin/HEAD", cwd=repo, check=False)
    candidates = []
    if remote.returncode == 0:
        candidates.append(remote.stdout.strip().split("/", 1)[-1])
    configured = git("config", "--get", "init.defaultBranch", cwd=repo, check=False)
    candidates += [configured.stdout.strip(), "main", "master"]
    for name in candidates:
        if name and has_ref(repo, f"refs/heads/{name}"):
            return name
    current = git("symbolic-ref", "--short", "HEAD", cwd=repo, check=False)
    if current.returncode == 0 and has_ref(repo, "HEAD"):
        return current.stdout.strip()
    raise GitError(f"no default branch in {repo}: commit something on main first")


def branch_name(issue: int, title: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:SLUG_LENGTH].strip("-")
    return f"{BRANCH_PREFIX}{issue}-{slug or 'work'}"


def dirty_paths(path: Path) -> list[str]:
    """Uncommitted changes (untracked files included; the runner's own excluded)."""
    out = git("status", "--porcelain", "--untracked-files=normal", cwd=path).stdout
    return [line[3:] for line in out.splitlines() if line.strip()]


def worktree_state(path: Path) -> str:
    """A digest of the worktree's state: its HEAD, what is uncommitted and how. Two
    looks give the same digest iff nothing was committed, edited or added between."""
    head = git("rev-parse", "--verify", "-q", "HEAD", cwd=path, check=False).stdout
    status = git("status", "--porcelain", "--untracked-files=normal", cwd=path).stdout
    diff = git("diff", "HEAD", "--no-color", "--no-ext-diff", cwd=path, check=False).stdout
    return hashlib.sha256(f"{head}\0{status}\0{diff}".encode()).hexdigest()


def prepare_worktree(repo: Path, where: Path, branch: str, base: str) -> str:
    """``where`` checked out on the issue's branch (made from ``base`` when new): a new
    linked worktree of ``repo``, or the agent's worktree from an earlier run, reused
    when it is clean. Returns the branch checked out. Never discards anyone's work.

    A branch is never checked out in two worktrees: a commit in one would move it
    under the other, whose files would then look like uncommitted changes (the
    reverse of the commit). The issue's branch is ``branch`` or its latest
    continuation (``branch-2``, ``-3``…). When that one is checked out in another
    worktree (a runner that died mid-unit, or a person), that worktree is not ours
    to touch, clean or not: the work goes on from the branch's tip on a new
    continuation, so nothing there is lost, moved or reversed."""
    ours = where.resolve()
    git("worktree", "prune", cwd=repo)  # worktrees whose directories are gone hold nothing
    latest = latest_branch(repo, branch)
    start: str | None = None  # a new branch is made from it
    if latest is None:
        latest, start = branch, base
    else:
        holders = [path for path in checkouts_of(repo, latest) if path.resolve() != ours]
        if holders:
            start, latest = latest, next_branch(repo, branch)
            say(
                f"{start} is checked out in {holders[0]}, which is not this runner's to "
                f"touch: the work goes on from its tip on a new branch, {latest}"
            )
    if not where.exists():
        where.parent.mkdir(parents=True, exist_ok=True)
        if start is None:
            git("worktree", "add", str(where), latest, cwd=repo)
        else:
            git("worktree", "add", "-b", latest, str(where), start, cwd=repo)
        return latest
    if toplevel(where) != ours or common_dir(where) != common_dir(repo):
        raise GitError(f"{where} exists and is not a worktree of {repo}: move it away")
    dirty = dirty_paths(where)
    if dirty:
        shown = ", ".join(dirty[:5]) + (" …" if len(dirty) > 5 else "")
        raise GitError(
            f"the worktree {where} has uncommitted changes ({shown}); commit or discard "
            "them there, then run again (the runner never discards work)"
        )
    if start is None:
        git("checkout", "-q", latest, cwd=where)
    else:
        git("checkout", "-q", "-b", latest, start, cwd=where)
    return latest


def continuations(repo: Path, branch: str) -> dict[int, str]:
    """``branch`` (as 1) and its continuations ``branch-N`` (as N) that exist."""
    out = git("for-each-ref", "--format=%(refname:short)", "refs/heads/", cwd=repo).stdout
    pattern = re.compile(re.escape(branch) + r"(?:-(\d+))?")
    found: dict[int, str] = {}
    for name in out.splitlines():
        match = pattern.fullmatch(name.strip())
        if match:
            found[int(match.group(1) or 1)] = match.group(0)
    return found


def latest_branch(repo: Path, branch: str) -> str | None:
    found = continuations(repo, branch)
    return found[max(found)] if found else None


def next_branch(repo: Path, branch: str) -> str:
    return f"{branch}-{max(continuations(repo, branch), default=1) + 1}"


def moved_under(path: Path) -> bool:
    """True when the branch checked out in ``path`` is not where this worktree last
    put it (its own HEAD reflog): it moved by a commit or reset elsewhere, and the
    files that look uncommitted here may be the reverse of that commit."""
    tip = git("rev-parse", "--verify", "-q", "HEAD", cwd=path, check=False).stdout.strip()
    last = git("log", "-g", "-1", "--format=%H", "HEAD", cwd=path, check=False).stdout.strip()
    return not last or tip != last


def keep_leftover(repo: Path, where: Path, message: str) -> str | None:
    """What a unit that never ended (its runner killed) left uncommitted in the
    agent's worktree ``where``, committed onto the branch it had checked out: the
    branch it was made for, so the work goes on from there. Only when that branch is
    checked out nowhere else and did not move under ``where``, and is one of the
    runner's (a person's branch is theirs to commit on); else it is left as it is.
    Returns the branch committed on, or None."""
    if not where.is_dir() or toplevel(where) != where.resolve():
        return None
    if common_dir(where) != common_dir(repo) or not dirty_paths(where):
        return None
    branch = current_branch(where)
    if branch is None or not branch.startswith(BRANCH_PREFIX) or moved_under(where):
        return None
    if any(path.resolve() != where.resolve() for path in checkouts_of(repo, branch)):
        return None
    return branch if commit_all(where, message) else None


def detach(path: Path) -> None:
    """Leave ``path`` on its commit, no branch checked out (its files as they are)."""
    git("checkout", "-q", "--detach", cwd=path)


def exclude(path: Path, *patterns: str) -> None:
    """Lines in the repository's info/exclude, once each: git ignores them everywhere."""
    target = git_path(path, "info/exclude")
    target.parent.mkdir(parents=True, exist_ok=True)
    present = target.read_text().splitlines() if target.exists() else []
    missing = [pattern for pattern in patterns if pattern not in present]
    if missing:
        with target.open("a") as file:
            if present and present[-1] != "":
                file.write("\n")
            file.write("\n".join(missing) + "\n")


def commit_subjects(path: Path, base: str) -> list[str]:
    """The subjects of the commits on HEAD since it left ``base``, oldest first."""
    fork = git("merge-base", base, "HEAD", cwd=path, check=False).stdout.strip()
    if not fork:
        return []
    out = git("log", "--reverse", "--format=%s", f"{fork}..HEAD", cwd=path, check=False).stdout
    return [line for line in out.splitlines() if line.strip()]


# --- a branch brought up to date, and landed --------------------------------------------


def head(path: Path) -> str:
    return git("rev-parse", "HEAD", cwd=path).stdout.strip()


def current_branch(path: Path) -> str | None:
    result = git("symbolic-ref", "--quiet", "--short", "HEAD", cwd=path, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def commit_all(path: Path, message: str) -> bool:
    """Everything uncommitted in ``path`` (untracked files too; ignored and excluded
    ones not) as one commit, hooks skipped; False when there was nothing to commit."""
    if not dirty_paths(path):
        return False
    git("add", "-A", cwd=path)
    git("commit", "-q", "--no-verify", "-m", message, cwd=path)
    return True


def rebase(path: Path, onto: str, *, autostash: bool = False) -> list[str] | None:
    """Rebase ``path``'s branch onto ``onto``: None when done; else the rebase is
    aborted (the worktree as it was, stashed work restored) and the files that
    conflicted are returned (the branch's own, or the stash's when the autostash
    could not be applied)."""
    args = ["-c", "rebase.autoStash=false", "rebase", "-q"]
    if autostash:
        args.append("--autostash")
    result = git(*args, onto, cwd=path, check=False)
    if result.returncode == 0:
        if autostash and unmerged(path):  # the stash did not apply cleanly: undo it
            return _undo_autostash(path)
        return None
    conflicts = unmerged(path) or [
        "(git: " + (result.stderr.strip().splitlines() or ["?"])[-1] + ")"
    ]
    if rebase_in_progress(path):
        git("rebase", "--abort", cwd=path, check=False)
    return conflicts


def _undo_autostash(path: Path) -> list[str]:
    conflicts = unmerged(path)
    # git keeps the stash when applying it conflicted: put the tree back on the old
    # HEAD with the stash applied there, where it came from.
    git("reset", "-q", "--hard", "ORIG_HEAD", cwd=path)
    git("stash", "pop", "-q", cwd=path)
    return conflicts


def unmerged(path: Path) -> list[str]:
    out = git("diff", "--name-only", "--diff-filter=U", cwd=path, check=False).stdout
    return sorted({line for line in out.splitlines() if line.strip()})


def rebase_in_progress(path: Path) -> bool:
    return any(git_path(path, name).exists() for name in ("rebase-merge", "rebase-apply"))


def has_remote(repo: Path, name: str = "origin") -> bool:
    return git("remote", "get-url", name, cwd=repo, check=False).returncode == 0


def checkouts_of(repo: Path, branch: str) -> list[Path]:
    """The work trees (main or linked) that have ``branch`` checked out."""
    out = git("worktree", "list", "--porcelain", cwd=repo).stdout
    where: Path | None = None
    found: list[Path] = []
    for line in out.splitlines():
        if line.startswith("worktree "):
            where = Path(line[len("worktree ") :])
        elif line == f"branch refs/heads/{branch}" and where is not None:
            found.append(where)
    return found


def checkout_of(repo: Path, branch: str) -> Path | None:
    """The work tree (main or linked) that has ``branch`` checked out, if any."""
    found = checkouts_of(repo, branch)
    return found[0] if found else None


def fast_forward(repo: Path, branch: str, old: str, new: str) -> str | None:
    """Move ``branch`` of ``repo`` from ``old`` to ``new`` (a descendant): None when
    done, else why not. A checkout that has the branch checked out is moved with
    ``merge --ff-only`` (its uncommitted work kept, or the move refused); else the ref
    is compare-and-swapped, so a branch that moved meanwhile is never overwritten."""
    checkout = checkout_of(repo, branch)
    if checkout is not None:
        if head(checkout) != old:
            return f"{branch} moved meanwhile (now {head(checkout)[:12]})"
        result = git("merge", "-q", "--ff-only", new, cwd=checkout, check=False)
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            return f"git merge --ff-only in {checkout} failed: {detail[-1] if detail else '?'}"
        return None
    result = git("update-ref", f"refs/heads/{branch}", new, old, cwd=repo, check=False)
    if result.returncode != 0:
        return f"{branch} moved meanwhile ({result.stderr.strip() or 'update-ref refused'})"
    return None


def push(repo: Path, branch: str, new: str, old: str | None = None) -> str | None:
    """Push ``new`` to the remote's ``branch`` (a fast-forward only; with ``old``, only
    if the remote's branch is still there): None or why not."""
    lease = [f"--force-with-lease=refs/heads/{branch}:{old}"] if old else []
    target = f"{new}:refs/heads/{branch}"
    result = git("push", "-q", *lease, "origin", target, cwd=repo, check=False)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        return f"git push origin {branch} refused: {detail[-1] if detail else '?'}"
    return None


# --- what the agent changed, and what changed under it ------------------------------------


def upstream(repo: Path, default: str) -> str:
    """The ref the default branch is read from: the remote's, when there is one."""
    remote = f"refs/remotes/origin/{default}"
    return remote if has_remote(repo) and has_ref(repo, remote) else f"refs/heads/{default}"


def branch_point(path: Path, base: str) -> str | None:
    result = git("merge-base", base, "HEAD", cwd=path, check=False)
    return result.stdout.strip() or None


def changed_paths(path: Path, base: str) -> list[str]:
    """Every path changed in ``path`` since HEAD left ``base``: committed since the
    branch point, staged, unstaged, untracked; deletions included, renames as both
    their sides; the runner's own .projektor/ left out."""
    found: set[str] = set()
    fork = branch_point(path, base)
    if fork:
        out = git("diff", "--name-only", "--no-renames", "-z", fork, "HEAD", cwd=path).stdout
        found.update(name for name in out.split("\0") if name)
    out = git(
        "status", "--porcelain", "--no-renames", "--untracked-files=all", "-z", cwd=path
    ).stdout
    found.update(entry[3:] for entry in out.split("\0") if len(entry) > 3)
    return sorted(p for p in found if not p.startswith(".projektor/"))


def changed_upstream(path: Path, base: str) -> set[str]:
    """The paths ``base`` changed since HEAD's branch point: where HEAD is stale."""
    fork = branch_point(path, base)
    if not fork:
        return set()
    out = git("diff", "--name-only", "--no-renames", "-z", fork, base, cwd=path).stdout
    return {name for name in out.split("\0") if name}


def freshen(path: Path, base: str, claimed: list[str]) -> tuple[list[str], list[str] | None]:
    """Fresh base for ``claimed``: those of them that ``base`` changed since the branch
    point (the stale ones), and, when there were any, the rebase's outcome: None when
    the branch (uncommitted work carried across) is now on ``base``, else the files
    that conflicted (the rebase undone, the worktree as it was)."""
    stale = sorted(changed_upstream(path, base) & set(claimed))
    if not stale:
        return [], None
    return stale, rebase(path, base, autostash=True)
