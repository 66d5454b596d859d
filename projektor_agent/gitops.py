"""The git side of a run: the agent's own worktree, a branch per issue from the default
branch, the runner's exclude lines, the guard's hook, and the branch's commits."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

from projektor_agent.errors import UsageError

GUARD_MARK = "Projektor pre-commit guard"  # in the guard's docstring: a hook of ours
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


def prepare_worktree(repo: Path, where: Path, branch: str, base: str) -> None:
    """``where`` checked out on ``branch`` (made from ``base`` when new): a new linked
    worktree of ``repo``, or the agent's worktree from an earlier run, reused when it
    is clean. Never discards anyone's work."""
    if not where.exists():
        git("worktree", "prune", cwd=repo)
        where.parent.mkdir(parents=True, exist_ok=True)
        if has_ref(repo, f"refs/heads/{branch}"):
            # The branch of an earlier attempt: its work goes on (--force: it may still
            # be checked out in the worktree of a runner that died).
            git("worktree", "add", "--force", str(where), branch, cwd=repo)
        else:
            git("worktree", "add", "-b", branch, str(where), base, cwd=repo)
        return
    if toplevel(where) != where.resolve() or common_dir(where) != common_dir(repo):
        raise GitError(f"{where} exists and is not a worktree of {repo}: move it away")
    dirty = dirty_paths(where)
    if dirty:
        shown = ", ".join(dirty[:5]) + (" …" if len(dirty) > 5 else "")
        raise GitError(
            f"the worktree {where} has uncommitted changes ({shown}); commit or discard "
            "them there, then run again (the runner never discards work)"
        )
    if has_ref(where, f"refs/heads/{branch}"):
        git("checkout", "-q", "--ignore-other-worktrees", branch, cwd=where)
    else:
        git("checkout", "-q", "-b", branch, base, cwd=where)


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


def install_guard(path: Path, script: bytes) -> str | None:
    """The guard as the pre-commit hook of ``path``'s repository; None when done, else
    why not (another pre-commit hook is there: never replaced)."""
    hook = git_path(path, "hooks") / "pre-commit"
    if hook.exists():
        existing = hook.read_bytes()
        if existing == script:
            return None
        if GUARD_MARK.encode() not in existing:
            return f"{hook} is another pre-commit hook: left as it is, the guard not installed"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_bytes(script)
    hook.chmod(0o755)
    return None


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


def checkout_of(repo: Path, branch: str) -> Path | None:
    """The work tree (main or linked) that has ``branch`` checked out, if any."""
    out = git("worktree", "list", "--porcelain", cwd=repo).stdout
    where: Path | None = None
    for line in out.splitlines():
        if line.startswith("worktree "):
            where = Path(line[len("worktree ") :])
        elif line == f"branch refs/heads/{branch}" and where is not None:
            return where
    return None


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


def push(repo: Path, branch: str, new: str) -> str | None:
    """Push ``new`` to the remote's ``branch`` (a fast-forward only): None or why not."""
    result = git("push", "-q", "origin", f"{new}:refs/heads/{branch}", cwd=repo, check=False)
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
