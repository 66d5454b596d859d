"""An issue passed from one agent's worktree to another's: its branch is checked out
in one worktree at a time, a unit leaves its worktree detached, and a --loop outlives
a worktree it cannot use for one unit."""

import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path

from tests.agent.conftest import (
    agent_command,
    clean_env,
    git,
    read_json,
    released,
    unique,
    wait_until,
)
from tests.agent.test_runner import control_dir, gone, started


class CheckoutWatch:
    """Samples ``git worktree list --porcelain`` in a thread: how many worktrees had
    each branch checked out at once, at most."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.most: Counter[str] = Counter()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        while not self.done.wait(0.02):
            listed = subprocess.run(
                ["git", "worktree", "list", "--porcelain"],
                cwd=self.repo,
                env=clean_env(),
                capture_output=True,
                text=True,
                check=False,
            ).stdout
            now = Counter(
                line.removeprefix("branch ")
                for line in listed.splitlines()
                if line.startswith("branch ")
            )
            for branch, count in now.items():
                self.most[branch] = max(self.most[branch], count)

    def stop(self) -> Counter[str]:
        self.done.set()
        self.thread.join()
        return self.most


def worktree_run(projektor, repo, tmp_path, agent, *args, behaviour=(), wait=True):
    control = control_dir(tmp_path)
    runner = projektor(
        "run",
        *args,
        "--worktrees",
        str(tmp_path / "wt"),
        "--scan",
        "0",
        *agent_command(control, *behaviour),
        cwd=repo,
        agent=agent,
        wait=wait,
    )
    return control, runner


def test_an_issue_given_back_and_taken_by_another_agent_never_shares_its_branch(
    api, projektor, repo, tmp_path
):
    project, alpha, beta = api.project(), unique("alpha"), unique("beta")
    shared = api.issue(project, "Shared work", requires_filesystem=True)
    branch = f"refs/heads/projektor/{shared['id']}-shared-work"
    watch = CheckoutWatch(repo)

    # alpha edits, then fails: the issue is given back, its edit kept on the branch.
    _, done = worktree_run(
        projektor,
        repo,
        tmp_path,
        alpha,
        "--issue",
        str(shared["id"]),
        behaviour=("--edit", "src/shared.txt", "--exit", "1"),
    )
    assert done.returncode == 1, done.stderr
    alphas = tmp_path / "wt" / alpha
    assert git(alphas, "branch", "--show-current") == ""  # detached: the branch is free
    assert git(alphas, "status", "--porcelain") == ""
    assert api.get(f"/issues/{shared['id']}/")["status"] == "todo"

    # beta takes it, continues alpha's work and lands it on main.
    control, taker = worktree_run(
        projektor,
        repo,
        tmp_path,
        beta,
        "--issue",
        str(shared["id"]),
        "--integrate",
        behaviour=("--wait", "--edit", "src/shared.txt", "--commit", "Finish the shared work"),
        wait=False,
    )
    assert Path(started(control, taker)["cwd"]) == tmp_path / "wt" / beta
    assert git(tmp_path / "wt" / beta, "symbolic-ref", "HEAD") == branch
    released(control)
    assert taker.wait() == 0, taker.stderr

    # alpha's next unit, in the same worktree, under --loop: nothing there is in the way.
    other = api.issue(project, "Other work", requires_filesystem=True)
    _, loop = worktree_run(
        projektor,
        repo,
        tmp_path,
        alpha,
        "--loop",
        "--project",
        project,
        "--integrate",
        behaviour=("--edit", "src/other.txt", "--commit", "Do the other work"),
        wait=False,
    )
    wait_until(
        lambda: api.get(f"/issues/{other['id']}/")["status"] == "in_review",
        "alpha's loop to hand the other issue in",
    )
    loop.process.send_signal(signal.SIGINT)
    assert loop.wait() == 0, loop.stderr
    assert "uncommitted changes" not in loop.stderr and "moved under" not in loop.stderr
    most = watch.stop()

    assert most[branch] == 1  # seen checked out, never in two worktrees at once
    assert all(count == 1 for count in most.values()), most
    assert git(repo, "show", "main:src/shared.txt").splitlines() == [
        f"edited by the scripted agent for issue {shared['id']}",
        f"edited by the scripted agent for issue {shared['id']}",
    ]
    assert git(repo, "show", "main:src/other.txt")
    # Every change on main only adds: no commit there undoes another's work.
    numstat = git(repo, "log", "main", "--numstat", "--format=")
    assert [line.split("\t")[1] for line in numstat.splitlines() if line] == ["0"] * len(
        numstat.splitlines()
    )
    subjects = git(repo, "log", "--format=%s", "main").splitlines()
    assert subjects[:3] == [
        "Do the other work",
        "Finish the shared work",
        f"projektor: unfinished work of {alpha} on issue {shared['id']} "
        "(the agent exited with status 1)",
    ]


def test_a_loop_goes_on_past_a_worktree_it_cannot_use_for_one_unit(api, projektor, repo, tmp_path):
    project, agent = api.project(), unique("gamma")
    first = api.issue(project, "First", requires_filesystem=True)
    worktree = tmp_path / "wt" / agent
    git(repo, "worktree", "add", "-q", "--detach", str(worktree), "main")
    (worktree / "src" / "app.py").write_text("a person's edit, on no branch\n")

    _, loop = worktree_run(
        projektor,
        repo,
        tmp_path,
        agent,
        "--loop",
        "--project",
        project,
        behaviour=("--edit", "src/done.txt", "--commit", "Done"),
        wait=False,
    )
    wait_until(lambda: "other work in" in loop.stderr, "the unit to fail on the worktree")
    assert "uncommitted changes (src/app.py)" in loop.stderr
    back = api.get(f"/issues/{first['id']}/")
    assert back["status"] == "todo" and back["lease"] is None
    assert any("uncommitted changes" in body for body in api.messages(first["id"]))
    assert (worktree / "src" / "app.py").read_text() == "a person's edit, on no branch\n"
    assert loop.process.poll() is None  # the loop goes on

    git(worktree, "checkout", "--", "src/app.py")  # the person puts it away
    second = api.issue(project, "Second", requires_filesystem=True)
    for issue in (first, second):
        wait_until(
            lambda issue=issue: api.get(f"/issues/{issue['id']}/")["status"] == "in_review",
            f"the loop to hand issue {issue['id']} in",
        )
    loop.process.send_signal(signal.SIGINT)
    assert loop.wait() == 0, loop.stderr
    assert "Traceback" not in loop.stderr


def test_work_left_by_a_killed_runner_is_kept_on_its_branch_by_the_next_unit(
    api, projektor, repo, tmp_path
):
    project, agent = api.project(), unique("delta")
    first = api.issue(project, "Interrupted", requires_filesystem=True)
    control, killed = worktree_run(
        projektor,
        repo,
        tmp_path,
        agent,
        "--issue",
        str(first["id"]),
        behaviour=("--wait",),
        wait=False,
    )
    agent_process = started(control, killed)
    worktree = tmp_path / "wt" / agent
    (worktree / "src" / "wip.py").write_text("work in progress\n")  # the agent's, so far
    killed.process.send_signal(signal.SIGKILL)
    killed.wait()
    wait_until(lambda: gone(agent_process["pid"]), "the agent to die with its runner")
    first_branch = f"projektor/{first['id']}-interrupted"
    assert git(worktree, "branch", "--show-current") == first_branch
    assert git(worktree, "status", "--porcelain") == "?? src/wip.py"

    second = api.issue(project, "Next", requires_filesystem=True)
    control, done = worktree_run(
        projektor,
        repo,
        tmp_path,
        agent,
        "--issue",
        str(second["id"]),
        behaviour=("--edit", "src/next.py", "--commit", "Next"),
    )
    assert done.returncode == 0, done.stderr
    assert read_json(control / "started.json")["env"]["PROJEKTOR_ISSUE"] == str(second["id"])
    assert f"left uncommitted is kept on {first_branch}" in done.stderr
    assert git(repo, "log", "-1", "--format=%s", first_branch) == (
        f"projektor: work left uncommitted by a unit of {agent} that did not end "
        "(its runner stopped)"
    )
    assert git(repo, "show", f"{first_branch}:src/wip.py")
    second_branch = f"projektor/{second['id']}-next"
    files = git(repo, "ls-tree", "-r", "--name-only", second_branch).splitlines()
    assert "src/next.py" in files and "src/wip.py" not in files  # from main
    assert git(worktree, "status", "--porcelain") == ""
    assert git(worktree, "branch", "--show-current") == ""


def test_what_looks_uncommitted_where_the_branch_moved_under_the_worktree_is_left_alone(
    api, projektor, repo, tmp_path
):
    """A branch once checked out in two worktrees (by hand, or by an older runner): a
    commit in one shows in the other as its reverse, never to be committed there."""
    project, agent = api.project(), unique("epsilon")
    issue = api.issue(project, "After the mix-up", requires_filesystem=True)
    worktree, other = tmp_path / "wt" / agent, tmp_path / "other"
    git(repo, "worktree", "add", "-q", "-b", "projektor/1000-old", str(worktree), "main")
    git(repo, "worktree", "add", "-q", "--force", str(other), "projektor/1000-old")
    (other / "README.md").write_text("scratch\nmore\n")
    git(other, "commit", "-q", "-am", "More readme")
    git(other, "checkout", "-q", "--detach")
    assert git(worktree, "status", "--porcelain") == "M  README.md"  # the reverse, staged

    _, done = worktree_run(
        projektor, repo, tmp_path, agent, "--issue", str(issue["id"]), behaviour=("--exit", "0")
    )
    assert done.returncode == 2, done.stderr
    assert "uncommitted changes (README.md)" in done.stderr
    assert git(repo, "log", "-1", "--format=%s", "projektor/1000-old") == "More readme"
    assert git(worktree, "status", "--porcelain") == "M  README.md"
    assert api.get(f"/issues/{issue['id']}/")["status"] == "todo"
