"""The guard armed in the checkout a runner did not create (no ``--worktrees``): in
that worktree alone, through its own configuration, the user's own hooks still run,
and everything is as it was found once the runner is done, even after a runner that
was killed (invariant 19 (A runner's child never outlives its runner's right to work))."""

import signal
import subprocess
from pathlib import Path

from tests.agent.conftest import agent_command, clean_env, git, unique, wait_until
from tests.agent.test_runner import control_dir, gone, started

USER_HOOK = '#!/bin/sh\necho "$(basename "$0")" >> {log}\n'


def user_hooks(repo: Path, tmp_path: Path) -> tuple[Path, bytes]:
    """A pre-commit and a commit-msg hook of the user's, each noting that it ran."""
    log = tmp_path / "user-hooks-ran"
    hook = USER_HOOK.format(log=log).encode()
    for name in ("pre-commit", "commit-msg"):
        path = repo / ".git" / "hooks" / name
        path.write_bytes(hook)
        path.chmod(0o755)
    return log, hook


def commit_by_hand(repo: Path, name: str) -> subprocess.CompletedProcess[str]:
    (repo / name).write_text("by hand\n")
    git(repo, "add", name)
    return subprocess.run(
        ["git", "commit", "-m", f"Add {name}"],
        cwd=repo,
        env=clean_env(),
        capture_output=True,
        text=True,
        check=True,
    )


def assert_as_found(repo: Path, hook: bytes) -> None:
    assert (repo / ".git" / "hooks" / "pre-commit").read_bytes() == hook
    assert not (repo / ".git" / "projektor-hooks").exists()
    own = subprocess.run(
        ["git", "config", "--worktree", "--get", "core.hooksPath"], cwd=repo, env=clean_env()
    )
    assert own.returncode == 1  # no core.hooksPath of the runner's left
    assert git(repo, "rev-parse", "--git-path", "hooks") == ".git/hooks"


def test_a_users_checkout_is_left_as_found_and_its_hooks_still_run(api, projektor, repo, tmp_path):
    log, hook = user_hooks(repo, tmp_path)
    issue = api.issue(api.project())
    control = control_dir(tmp_path)
    done = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        *agent_command(control, "--edit", "src/new.py", "--commit", "Add new"),
        cwd=repo,
        agent=unique("hestia"),
    )
    assert done.returncode == 0, done.stderr
    armed = started(control)["hooks"]
    assert Path(armed) == repo / ".git" / "projektor-hooks"  # this worktree's own
    assert log.read_text().split() == ["pre-commit", "commit-msg"]  # for the agent's commit
    assert_as_found(repo, hook)
    later = commit_by_hand(repo, "later.txt")
    assert "projektor" not in later.stderr + later.stdout  # no guard, no warning
    assert log.read_text().split() == ["pre-commit", "commit-msg"] * 2


def test_the_guard_refuses_the_agents_commit_of_a_file_another_issue_holds(
    api, projektor, repo, tmp_path
):
    project = api.project()
    holder = api.issue(project, "Holds it")
    theirs = api.post("/work/start/", {"agent": unique("rhea"), "issue": holder["id"]})
    api.post(
        "/file-claims/",
        {"issue": holder["id"], "paths": ["src/app.py"], "session": theirs["session"]["id"]},
        expect=201,
    )
    issue = api.issue(project)
    done = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--scan",
        "0",
        *agent_command(control_dir(tmp_path), "--edit", "src/app.py", "--commit", "Take it"),
        cwd=repo,
        agent=unique("hestia"),
    )
    assert done.returncode == 1, done.stderr
    assert "commit refused" in done.stderr and f"issue {holder['id']}" in done.stderr
    assert git(repo, "log", "-1", "--format=%s") == "Initial commit"
    assert not (repo / ".git" / "projektor-hooks").exists()


def test_a_guard_left_by_a_killed_runner_is_recognised_and_removed(api, projektor, repo, tmp_path):
    log, hook = user_hooks(repo, tmp_path)
    project, control = api.project(), control_dir(tmp_path)
    runner = projektor(
        "run",
        "--issue",
        str(api.issue(project)["id"]),
        *agent_command(control, "--wait"),
        cwd=repo,
        agent=unique("hestia"),
        wait=False,
    )
    child = started(control, runner)
    runner.process.send_signal(signal.SIGKILL)
    runner.process.wait()
    wait_until(lambda: gone(child["pid"]), "the agent to die with its runner")
    assert git(repo, "rev-parse", "--git-path", "hooks") == str(repo / ".git" / "projektor-hooks")
    # Left armed, it stays quiet outside a runner and still runs the user's hooks.
    by_hand = commit_by_hand(repo, "meanwhile.txt")
    assert "projektor" not in by_hand.stderr + by_hand.stdout
    assert log.read_text().split() == ["pre-commit", "commit-msg"]

    done = projektor(
        "run",
        "--issue",
        str(api.issue(project)["id"]),
        *agent_command(control_dir(tmp_path)),
        cwd=repo,
        agent=unique("hestia"),
    )
    assert done.returncode == 0, done.stderr
    assert_as_found(repo, hook)
