"""The guard armed in the checkout a runner did not create (no ``--worktrees``): in
that worktree alone, through its own configuration, the user's own hooks still run,
and everything is as it was found once the runner is done, even after a runner that
was killed (invariant 19 (A runner's child never outlives its runner's right to work))."""

import shutil
import signal
import subprocess
from pathlib import Path

from tests.agent.conftest import agent_command, clean_env, git, unique, wait_until
from tests.agent.test_runner import control_dir, gone, started

USER_HOOK = '#!/bin/sh\necho "$(basename "$0")" >> {log}\n'


def user_hooks(repo: Path, tmp_path: Path) -> Path:
    """A pre-commit and a commit-msg hook of the user's, each noting that it ran."""
    log = tmp_path / "user-hooks-ran"
    hook = USER_HOOK.format(log=log).encode()
    for name in ("pre-commit", "commit-msg"):
        path = repo / ".git" / "hooks" / name
        path.write_bytes(hook)
        path.chmod(0o755)
    return log


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


def found(repo: Path) -> dict[str, object]:
    """What a runner must leave as it was in a checkout it did not create: the
    repository's config, its info/exclude, its hooks, the worktree's own git files, and
    the work tree (what git says of it, and its files)."""
    dot_git = repo / ".git"
    exclude = dot_git / "info" / "exclude"
    hooks = dot_git / "hooks"
    return {
        "config": (dot_git / "config").read_bytes(),
        "info": sorted(p.name for p in (dot_git / "info").iterdir())
        if (dot_git / "info").is_dir()
        else None,
        "exclude": exclude.read_bytes() if exclude.exists() else None,
        "hooks": {p.name: p.read_bytes() for p in hooks.iterdir()} if hooks.is_dir() else None,
        "git files": sorted(
            p.name for p in dot_git.iterdir() if p.name.startswith(("projektor", "config"))
        ),
        "status": git(repo, "status", "--porcelain", "--ignored", "--untracked-files=all"),
        "files": sorted(
            p.relative_to(repo).as_posix()
            for p in repo.rglob("*")
            if ".git" not in p.relative_to(repo).parts
        ),
        "head": git(repo, "rev-parse", "HEAD"),
    }


def assert_as_found(repo: Path, before: dict[str, object]) -> None:
    """``repo`` as ``before`` (``found``), but for the commits made meanwhile and
    their files."""
    after = found(repo)
    committed = git(repo, "diff", "--name-only", str(before["head"]), "HEAD").split()
    folders = {parent.as_posix() for name in committed for parent in Path(name).parents}
    assert set(after["files"]) == set(before["files"]) | set(committed) | folders - {"."}
    for key in ("config", "info", "exclude", "hooks", "git files", "status"):
        assert after[key] == before[key], key
    own = subprocess.run(
        ["git", "config", "--worktree", "--get", "core.hooksPath"], cwd=repo, env=clean_env()
    )
    assert own.returncode == 1  # no core.hooksPath of the runner's left
    assert git(repo, "rev-parse", "--git-path", "hooks") == ".git/hooks"


def test_a_users_checkout_is_left_as_found_and_its_hooks_still_run(api, projektor, repo, tmp_path):
    log = user_hooks(repo, tmp_path)
    before = found(repo)
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
    assert_as_found(repo, before)
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
    log = user_hooks(repo, tmp_path)
    before = found(repo)
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
    assert (repo / ".projektor" / "issue.md").exists()  # and what else it had written
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
    assert_as_found(repo, before)


def test_a_checkout_without_hooks_or_excludes_is_left_without_them(api, projektor, repo, tmp_path):
    shutil.rmtree(repo / ".git" / "hooks")  # no hook of the user's, not even the samples
    shutil.rmtree(repo / ".git" / "info")  # no info/exclude
    before = found(repo)
    control = control_dir(tmp_path)
    done = projektor(
        "run",
        "--issue",
        str(api.issue(api.project())["id"]),
        *agent_command(control, "--report", '{"summary": "Nothing to do"}'),
        cwd=repo,
        agent=unique("hestia"),
    )
    assert done.returncode == 0, done.stderr
    assert started(control)["issue_md"]  # it had the issue's text
    assert_as_found(repo, before)
    assert not (repo / ".projektor").exists() and not (repo / ".git" / "info").exists()


def test_what_a_checkout_had_of_the_runners_own_is_kept(api, projektor, repo, tmp_path):
    """A .projektor/ of the user's, their line for it in info/exclude and
    extensions.worktreeConfig set to false are kept; what the runner added beside them
    (the issue's text, the agent CLI's hooks and their line in info/exclude) is not."""
    (repo / ".projektor").mkdir()
    (repo / ".projektor" / "notes.md").write_text("the user's own\n")
    with (repo / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write("/.projektor/\n*.log\n")
    git(repo, "config", "extensions.worktreeConfig", "false")
    before = found(repo)
    control = control_dir(tmp_path)
    done = projektor(
        "run",
        "--issue",
        str(api.issue(api.project())["id"]),
        "--hooks",
        "claude-code",
        *agent_command(control, "--edit", "src/new.py", "--commit", "Add new"),
        cwd=repo,
        agent=unique("hestia"),
    )
    assert done.returncode == 0, done.stderr
    assert started(control)["issue_md"]
    assert_as_found(repo, before)
    assert (repo / ".projektor" / "notes.md").read_text() == "the user's own\n"
    assert git(repo, "config", "--get", "extensions.worktreeConfig") == "false"
