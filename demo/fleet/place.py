"""Where the live demo works: a git repository beside the database, with the files
the demo's issues name, and the runners' worktrees and the scripted agent's plan
next to it.

On SQLite the place is a hidden folder beside the database file (``projektor.sqlite3``
→ ``.projektor.sqlite3-demo/``, which the checkout's ``.gitignore`` already leaves
out); on PostgreSQL ``.projektor-demo-<database>/`` in the checkout; the environment
variable ``PROJEKTOR_DEMO_DIR`` names another. It is made on the first run and kept:
the repository's ``main`` grows with every integrated issue, run after run.

The repository holds its check, ``check.py``: the runners land through the landing
queue, whose testers run it on each batch (``runners.verify_command``) and move
``main`` only to a tree that passed it.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from demo import world

BRANCH = "main"
AUTHOR = ("Projektor demo", "demo@projektor.invalid")
LINES = (12, 30)  # a file's first version, in lines
MARKER = "new entries above this line"
CHECK = "check.py"  # the repository's check, which the landing queue runs on each batch
CHECK_TEXT = '''"""The demo repository's check, which the landing queue runs on each batch it
tests: every Python file compiles and no file holds a conflict marker. The sleep stands
in for a test suite's run time."""

import sys
import time
from pathlib import Path

SUITE_SECONDS = 1.0
MARKERS = ("<<<<<<< ", ">>>>>>> ")


def files(root):
    """The checkout's files, hidden ones (.git, .projektor) left out."""
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if path.is_file() and not any(part.startswith(".") for part in parts):
            yield "/".join(parts), path


def failures(name, path):
    text = path.read_bytes().decode("utf-8", "replace")
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(MARKERS) or line == "=======":
            yield f"FAIL {name}:{number}: a conflict marker"
    if name.endswith(".py"):
        try:
            compile(text, name, "exec")
        except SyntaxError as error:
            yield f"FAIL {name}:{error.lineno}: {error.msg}"


def main():
    time.sleep(SUITE_SECONDS)
    checked = list(files(Path(__file__).resolve().parent))
    found = [line for name, path in checked for line in failures(name, path)]
    print("\\n".join([*found, f"check: {len(checked)} files, {len(found)} failures"]))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def marker_line(path: str) -> str:
    """A hot spot's marker: the scripted agent adds its entry just above it, as real
    changes add to the end of a list, so two changes made apart conflict on a rebase."""
    if path.endswith((".md", ".html")):
        return f"<!-- {MARKER} -->"
    if path.endswith((".ts", ".tsx", ".json")):
        return f"// {MARKER}"
    return f"# {MARKER}"


HOT = {path: [marker_line(path)] for path in world.HOT_SPOTS}  # the plan's ``hot``


@dataclass(frozen=True)
class Place:
    home: Path

    @property
    def repo(self) -> Path:
        return self.home / "repo"

    @property
    def worktrees(self) -> Path:
        return self.home / "worktrees"

    @property
    def plan(self) -> Path:
        return self.home / "plan.json"

    @property
    def logs(self) -> Path:
        return self.home / "logs"


def demo_place() -> Place:
    """The place of the database the settings name (see the module's docstring)."""
    named = os.environ.get("PROJEKTOR_DEMO_DIR")
    if named:
        return Place(Path(named).expanduser().resolve())
    database = settings.DATABASES["default"]
    name = str(database["NAME"])
    if "sqlite" in database["ENGINE"] and name and not name.startswith((":", "file:")):
        path = Path(name).resolve()
        return Place(path.parent / f".{path.name}-demo")
    return Place(Path(settings.BASE_DIR) / f".projektor-demo-{name or 'default'}")


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": AUTHOR[0],
        "GIT_AUTHOR_EMAIL": AUTHOR[1],
        "GIT_COMMITTER_NAME": AUTHOR[0],
        "GIT_COMMITTER_EMAIL": AUTHOR[1],
        "GIT_TERMINAL_PROMPT": "0",
    }
    result = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {result.stderr.strip()}")
    return result.stdout


def ensure_repository(place: Place, paths: Iterable[str]) -> bool:
    """The repository with ``paths`` (the demo's files and those its issues name) and
    its check on ``main``: made with one commit if missing (True), else the missing
    files (a repository made before there was a check: the check too) added in a commit
    of their own, the rest left as the fleet made it (False)."""
    place.home.mkdir(parents=True, exist_ok=True)
    place.worktrees.mkdir(exist_ok=True)
    place.logs.mkdir(exist_ok=True)
    if not (place.repo / ".git").exists():
        place.repo.mkdir(exist_ok=True)
        git(place.repo, "init", "--quiet", f"--initial-branch={BRANCH}")
        git(place.repo, "config", "user.name", AUTHOR[0])
        git(place.repo, "config", "user.email", AUTHOR[1])
    created = not has_branch(place.repo)  # new, or its first commit never made
    tracked = (
        set() if created else set(git(place.repo, "ls-tree", "-r", "--name-only", BRANCH).split())
    )
    named = (file for path in paths for file in files_for(path))
    wanted = sorted({CHECK, *world.SOURCE_TREE, *named})
    missing = [path for path in wanted if path not in tracked]
    if not missing:
        return created
    # Later files are committed in a worktree of their own, then main fast-forwarded.
    if created:
        write_files(place.repo, missing)
        git(place.repo, "add", "--", *missing)
        git(place.repo, "commit", "--quiet", "-m", "The demo's source tree")
    else:
        adding = place.home / "adding"
        git(place.repo, "worktree", "add", "--quiet", "--detach", str(adding), BRANCH)
        try:
            write_files(adding, missing)
            git(adding, "add", "--", *missing)
            message = "The files the demo's new issues name"
            if CHECK in missing:
                message = "The demo's check, and any files its new issues name"
            git(adding, "commit", "--quiet", "-m", message)
            head = git(adding, "rev-parse", "HEAD").strip()
        finally:
            git(place.repo, "worktree", "remove", "--force", str(adding))
        if git(place.repo, "branch", "--show-current").strip() == BRANCH:
            git(place.repo, "merge", "--quiet", "--ff-only", head)  # its checkout follows
        else:
            git(place.repo, "update-ref", f"refs/heads/{BRANCH}", head)
    return created


def has_branch(repo: Path) -> bool:
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{BRANCH}"],
        cwd=repo,
        capture_output=True,
        check=False,
    )
    return found.returncode == 0


def files_for(path: str) -> list[str]:
    """The files behind an expected path: itself, or two in a folder it names."""
    if path.endswith("/"):
        return [f"{path}README.md", f"{path}__init__.py"]
    return [path]


def write_files(root: Path, paths: Iterable[str]) -> None:
    for path in paths:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        text = CHECK_TEXT if path == CHECK else first_version(path)
        target.write_text(text, encoding="utf-8")


def first_version(path: str) -> str:
    """A file's text, the same for the same path: numbered lines the agents insert
    between, commented as the file's kind comments."""
    rng = random.Random(path)
    mark = "#" if path.endswith((".py", ".toml", "Makefile")) else "//"
    if path.endswith((".md", ".css", ".json", ".html")):
        mark = ""
    lines = [f"{mark} {path}".strip(), ""]
    lines += [
        f"{mark} line {number}: {rng.choice(WORDS)} {rng.choice(WORDS)}".strip()
        for number in range(1, rng.randint(*LINES) + 1)
    ]
    if path in HOT:
        lines[len(lines) // 2 : len(lines) // 2] = ["", *HOT[path], ""]
    return "\n".join(lines) + "\n"


WORDS = (
    "leases",
    "claims",
    "sessions",
    "worktrees",
    "runs",
    "events",
    "review",
    "settings",
    "routes",
    "the board",
    "the heatmap",
    "health",
)
