"""A git repository generated from a seed, and the plan of the issues worked on it.

    from demo.workbench import repository
    plan = repository.create(Path("/tmp/repo"), seed=7, issues=12)
    plan.save(Path("/tmp/plan.json"))  # what the scripted agent reads (agent.py)

What the repository holds is ``layout``'s: one commit on ``main``, byte for byte the
same for the same seed and check seconds (fixed identity and dates). The plan, drawn
from the same seed, is ``plan``'s.
"""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

try:
    from demo.workbench.check_script import CHECK_SECONDS
    from demo.workbench.layout import HOT, SCAFFOLD, tree
    from demo.workbench.plan import Plan, draw_issues
except ImportError:  # beside agent.py run as a script: its folder is on the path
    from check_script import CHECK_SECONDS  # type: ignore[no-redef]
    from layout import HOT, SCAFFOLD, tree  # type: ignore[no-redef]
    from plan import Plan, draw_issues  # type: ignore[no-redef]

BASE = "main"
IDENTITY = {
    "GIT_AUTHOR_NAME": "Workbench",
    "GIT_AUTHOR_EMAIL": "workbench@example.com",
    "GIT_COMMITTER_NAME": "Workbench",
    "GIT_COMMITTER_EMAIL": "workbench@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00",
}


def create(
    path: Path,
    seed: int,
    issues: int = 12,
    *,
    ttl: float = 8.0,
    crash_rate: float = 0.15,
    long_rate: float = 0.15,
    extra_rate: float = 0.6,
    dependency_rate: float = 0.25,
    work_seconds: tuple[float, float] = (1.0, 3.0),
    check_seconds: float = CHECK_SECONDS,
) -> Plan:
    """Write the repository at ``path`` (a new or empty directory) and return its plan."""
    if issues < 1:
        raise ValueError("a plan needs at least one issue")
    path.mkdir(parents=True, exist_ok=True)
    if any(path.iterdir()):
        raise ValueError(f"{path} is not empty")
    rng = random.Random(seed)
    files = tree(rng, check_seconds)
    for relative, text in files.items():
        target = path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    git(path, "init", "-q", "-b", BASE)
    git(path, "config", "user.name", IDENTITY["GIT_AUTHOR_NAME"])
    git(path, "config", "user.email", IDENTITY["GIT_AUTHOR_EMAIL"])
    git(path, "add", "-A")
    git(path, "commit", "-q", "--no-verify", "-m", "Initial commit")
    cold = sorted(name for name in files if name not in HOT and name not in SCAFFOLD)
    plan = Plan(seed=seed, base=BASE, ttl=ttl, hot={k: list(v) for k, v in HOT.items()})
    plan.issues = draw_issues(
        rng,
        cold,
        issues,
        ttl=ttl,
        crash_rate=crash_rate,
        long_rate=long_rate,
        extra_rate=extra_rate,
        dependency_rate=dependency_rate,
        work_seconds=work_seconds,
    )
    return plan


def base_commit(path: Path) -> str:
    """The repository's first commit: what every run's commits on ``main`` follow."""
    return git(path, "rev-list", "--max-parents=0", BASE).split()[0]


def git(path: Path, *args: str) -> str:
    env = {**os.environ, **IDENTITY, "GIT_CONFIG_NOSYSTEM": "1"}
    result = subprocess.run(
        ["git", *args], cwd=path, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {path}: {result.stderr.strip()}")
    return result.stdout
