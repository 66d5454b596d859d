"""The runner's progress (docs/agents.md; invariant 17 (stalled is derived)'s stall rule): at each
heartbeat the watch looks at the worktree and reports progress only when it changed."""

import subprocess
import time
from pathlib import Path
from typing import Any

from projektor_agent.errors import Unreachable
from projektor_agent.supervise import Watch


class Recorder:
    """A client that records its POSTs (and may be down); its event log stays empty."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, Any]] = []
        self.down = False

    def post(self, path: str, body: Any = None, **options: Any) -> dict[str, Any]:
        if self.down:
            raise Unreachable("the server does not answer")
        self.posts.append((path, body))
        return {}

    def get(self, path: str, query: Any = None, **options: Any) -> dict[str, Any]:
        time.sleep(0.05)  # a long poll that found nothing
        return {"events": [], "next": (query or {}).get("after", 0)}


def git(path: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)


def repository(path: Path) -> Path:
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "agent@example.test")
    git(path, "config", "user.name", "Agent")
    (path / "a.py").write_text("one\n")
    git(path, "add", "a.py")
    git(path, "commit", "-q", "-m", "start")
    return path


def progress_posts(client: Recorder) -> list[Any]:
    return [body for path, body in client.posts if path == "/sessions/7/progress/"]


def test_progress_is_reported_when_the_worktree_changes_and_only_then(tmp_path: Path) -> None:
    where = repository(tmp_path)
    client = Recorder()
    watch = Watch(client, 7, 120.0, lambda why: None, workdir=lambda: where)  # type: ignore[arg-type]
    assert watch.progress_if_changed() is False  # the first look: where it starts
    assert watch.progress_if_changed() is False  # nothing changed
    (where / "a.py").write_text("two\n")
    assert watch.progress_if_changed() is True
    assert progress_posts(client) == [{"note": "the worktree changed"}]
    (where / "a.py").write_text("three\n")  # the same file edited again: still progress
    assert watch.progress_if_changed() is True
    git(where, "commit", "-q", "-am", "done")
    assert watch.progress_if_changed() is True  # a commit
    assert watch.progress_if_changed() is False
    assert len(progress_posts(client)) == 3


def test_no_worktree_yet_and_a_server_away_are_not_failures(tmp_path: Path) -> None:
    client = Recorder()
    workdir: list[Path | None] = [None]
    watch = Watch(client, 7, 120.0, lambda why: None, workdir=lambda: workdir[0])  # type: ignore[arg-type]
    assert watch.progress_if_changed() is False
    workdir[0] = repository(tmp_path)
    watch.progress_if_changed()
    (tmp_path / "b.py").write_text("new\n")
    client.down = True
    assert watch.progress_if_changed() is True  # reported as well as it could be
    assert progress_posts(client) == []


def test_a_worktree_not_yet_made_is_no_failure_and_the_heartbeats_go_on(tmp_path: Path) -> None:
    """The runner names its worktree before git has made it: a look there (no folder,
    then a folder git does not know yet) reports nothing, and the heartbeat thread that
    looks after each beat keeps beating (it once died there, and the session expired
    under its working agent)."""
    client = Recorder()
    where = tmp_path / "worktree"
    watch = Watch(client, 7, 1.0, lambda why: None, workdir=lambda: where)  # type: ignore[arg-type]
    assert watch.progress_if_changed() is False
    where.mkdir()
    assert watch.progress_if_changed() is False

    def beats() -> int:
        return sum(path == "/sessions/7/heartbeat/" for path, _ in client.posts)

    watch.start()
    try:
        deadline = time.monotonic() + 60
        while beats() < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        watch.close()
    assert beats() >= 3  # a look follows each beat: the thread outlived two of them
    repository(where)
    assert watch.progress_if_changed() is False  # the first look at a worktree: where it starts
