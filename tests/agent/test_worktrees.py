"""``projektor run --worktrees DIR``: each agent's own git worktree, registered with
the server and reused, a branch per issue from the default branch; and the checkouts
it refuses to touch."""

import json
import signal
from pathlib import Path

from tests.agent.conftest import agent_command, git, read_json, released, unique, wait_until
from tests.agent.test_runner import control_dir, started


def run_in_worktree(projektor, repo, tmp_path, issue, agent, *behaviour, hooks=False):
    control = control_dir(tmp_path)
    result = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--worktrees",
        str(tmp_path / "wt"),
        *(["--hooks", "claude-code"] if hooks else []),
        *agent_command(control, *behaviour),
        cwd=repo,
        agent=agent,
    )
    return control, result


def test_each_issue_gets_a_branch_in_the_agents_own_worktree_which_is_reused(
    api, projektor, repo, tmp_path
):
    project, agent = api.project(), unique("daphne")
    first = api.issue(project, "Add the Login page!", requires_filesystem=True)
    second = api.issue(project, "Fix the logout", requires_filesystem=True)
    (repo / "scratch.txt").write_text("the main checkout's own uncommitted work\n")

    control, done = run_in_worktree(
        projektor,
        repo,
        tmp_path,
        first,
        agent,
        "--edit",
        "src/login.py",
        "--commit",
        "Add login",
        hooks=True,
    )
    assert done.returncode == 0, done.stderr
    child = read_json(control / "started.json")
    worktree = tmp_path / "wt" / agent
    assert Path(child["cwd"]) == worktree
    branch = f"projektor/{first['id']}-add-the-login-page"
    assert git(worktree, "branch", "--show-current") == ""  # left detached: the branch is free
    assert git(worktree, "rev-parse", "HEAD") == git(repo, "rev-parse", branch)
    assert git(repo, "log", "-1", "--format=%s", branch) == "Add login"
    assert git(repo, "merge-base", branch, "main") == git(repo, "rev-parse", "main")
    assert git(worktree, "status", "--porcelain") == ""  # .projektor/, .claude/ git-ignored
    settings = json.loads((worktree / ".claude" / "settings.local.json").read_text())
    assert "hook claude-code" in json.dumps(settings["hooks"]["PreToolUse"])
    assert child["env"]["PROJEKTOR_WORKTREE"] == str(worktree)
    assert not (worktree / "scratch.txt").exists()
    # The guard was armed in the agent's worktree alone, and is gone with the unit.
    armed = Path(child["hooks"])
    assert armed.parent == Path(git(worktree, "rev-parse", "--absolute-git-dir"))
    assert not armed.exists() and not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert git(worktree, "rev-parse", "--git-path", "hooks") == str(repo / ".git" / "hooks")
    assert api.get("/worktrees/")["results"][0]["slug"] == agent
    session = api.session(int(child["env"]["PROJEKTOR_SESSION"]))
    assert session["worktree"] == agent
    [run] = api.get("/runs/", issue=first["id"])["results"]
    assert run["lock_mode"] == "exclusive" and run["worktree"] == agent
    assert run["status"] == "succeeded"
    handed = api.get(f"/issues/{first['id']}/")
    assert handed["status"] == "in_review" and branch in handed["report"]["summary"]

    control, done = run_in_worktree(
        projektor, repo, tmp_path, second, agent, "--edit", "src/logout.py", "--commit", "Fix it"
    )
    assert done.returncode == 0, done.stderr
    assert Path(read_json(control / "started.json")["cwd"]) == worktree
    second_branch = f"projektor/{second['id']}-fix-the-logout"
    assert git(worktree, "rev-parse", "HEAD") == git(repo, "rev-parse", second_branch)
    assert not (worktree / "src" / "login.py").exists()  # from main, not from the last branch
    summary = api.get(f"/issues/{second['id']}/")["report"]["summary"]
    assert "- Fix it" in summary and "Add login" not in summary


def test_a_branch_left_by_an_earlier_attempt_is_continued(api, projektor, repo, tmp_path):
    project, agent = api.project(), unique("eos")
    issue = api.issue(project, "Retry me", requires_filesystem=True)
    branch = f"projektor/{issue['id']}-retry-me"
    git(repo, "branch", branch, "main")
    git(repo, "worktree", "add", "-q", str(tmp_path / "first"), branch)
    (tmp_path / "first" / "first.txt").write_text("first attempt\n")
    git(tmp_path / "first", "add", ".")
    git(tmp_path / "first", "commit", "-q", "-m", "First attempt")
    git(tmp_path / "first", "checkout", "-q", "--detach")  # as a unit leaves it

    _, done = run_in_worktree(
        projektor, repo, tmp_path, issue, agent, "--edit", "second.txt", "--commit", "Second"
    )
    assert done.returncode == 0, done.stderr
    assert git(repo, "log", "--format=%s", branch).splitlines()[:2] == ["Second", "First attempt"]
    summary = api.get(f"/issues/{issue['id']}/")["report"]["summary"]
    assert "- First attempt\n- Second" in summary and f"Branch: {branch}\n" not in summary


def test_a_branch_checked_out_in_another_worktree_is_continued_on_a_new_branch(
    api, projektor, repo, tmp_path
):
    """Never one branch in two worktrees: a commit in one would show as the reverse
    in the other. The other worktree (here a person's, with work in progress) is
    left exactly as it was."""
    project, agent = api.project(), unique("eos")
    issue = api.issue(project, "Retry me", requires_filesystem=True)
    branch = f"projektor/{issue['id']}-retry-me"
    elsewhere = tmp_path / "elsewhere"
    git(repo, "worktree", "add", "-q", "-b", branch, str(elsewhere), "main")
    (elsewhere / "first.txt").write_text("first attempt\n")
    git(elsewhere, "add", ".")
    git(elsewhere, "commit", "-q", "-m", "First attempt")
    (elsewhere / "first.txt").write_text("first attempt, going on\n")  # uncommitted
    tip = git(repo, "rev-parse", branch)

    _, done = run_in_worktree(
        projektor, repo, tmp_path, issue, agent, "--edit", "second.txt", "--commit", "Second"
    )
    assert done.returncode == 0, done.stderr
    continued = f"{branch}-2"
    assert f"{branch} is checked out in {elsewhere}" in done.stderr and continued in done.stderr
    assert git(repo, "log", "--format=%s", continued).splitlines()[:2] == [
        "Second",
        "First attempt",
    ]
    assert git(repo, "rev-parse", branch) == tip  # the other worktree's branch did not move
    assert git(elsewhere, "branch", "--show-current") == branch
    assert git(elsewhere, "status", "--porcelain") == "M first.txt"
    summary = api.get(f"/issues/{issue['id']}/")["report"]["summary"]
    assert "- First attempt\n- Second" in summary and f"Branch: {continued}" in summary

    # The next attempt continues the latest branch (checked out nowhere now).
    for status in ("in_progress", "todo"):  # sent back by the reviewer
        api.post(f"/issues/{issue['id']}/transition/", {"to": status}, expect=200)
    _, done = run_in_worktree(
        projektor, repo, tmp_path, issue, agent, "--edit", "third.txt", "--commit", "Third"
    )
    assert done.returncode == 0, done.stderr
    assert git(repo, "log", "--format=%s", continued).splitlines()[:2] == ["Third", "Second"]
    assert git(repo, "rev-parse", branch) == tip


def test_a_dirty_worktree_is_never_discarded_and_the_issue_goes_back(
    api, projektor, repo, tmp_path
):
    project, agent = api.project(), unique("faun")
    first = api.issue(project, "First", requires_filesystem=True)
    second = api.issue(project, "Second", requires_filesystem=True)
    _, done = run_in_worktree(projektor, repo, tmp_path, first, agent)
    assert done.returncode == 0, done.stderr
    worktree = tmp_path / "wt" / agent
    (worktree / "src" / "app.py").write_text("left uncommitted\n")

    control, done = run_in_worktree(projektor, repo, tmp_path, second, agent)
    assert done.returncode == 2
    assert "uncommitted changes (src/app.py)" in done.stderr and "Traceback" not in done.stderr
    assert not (control / "started.json").exists()
    assert (worktree / "src" / "app.py").read_text() == "left uncommitted\n"
    back = api.get(f"/issues/{second['id']}/")
    assert back["status"] == "todo" and back["lease"] is None


def test_worktrees_need_a_git_repository(api, projektor, tmp_path):
    project = api.project()
    issue = api.issue(project, requires_filesystem=True)
    nowhere = tmp_path / "not-a-repo"
    nowhere.mkdir()
    _, done = run_in_worktree(projektor, nowhere, tmp_path, issue, unique("gaia"))
    assert done.returncode == 2
    assert "--worktrees needs a git repository" in done.stderr
    assert api.get(f"/issues/{issue['id']}/")["lease"] is None


def test_a_busy_worktree_is_waited_for_then_used(api, projektor, repo, tmp_path):
    """Two issues on one named worktree: the second runner waits for the first's run."""
    project = api.project()
    api.post("/worktrees/", {"slug": "shared", "name": "Shared"}, expect=201)
    first = api.issue(project, "One", worktree="shared")
    second = api.issue(project, "Two", worktree="shared")
    wt = str(tmp_path / "wt")
    one, two = control_dir(tmp_path), control_dir(tmp_path)
    holder = projektor(
        "run",
        "--issue",
        str(first["id"]),
        "--worktrees",
        wt,
        *agent_command(one, "--wait"),
        cwd=repo,
        agent=unique("hera"),
        wait=False,
    )
    started(one, holder)
    waiter = projektor(
        "run",
        "--issue",
        str(second["id"]),
        "--worktrees",
        wt,
        *agent_command(two),
        cwd=repo,
        agent=unique("iris"),
        wait=False,
    )
    wait_until(lambda: "worktree is busy" in waiter.stderr, "the second runner to wait")
    assert not (two / "started.json").exists()
    released(one)
    assert holder.wait() == 0, holder.stderr
    assert waiter.wait() == 0, waiter.stderr
    assert read_json(two / "started.json")["cwd"] == str(tmp_path / "wt" / "shared")


def test_an_unresolved_worktree_is_reported_and_the_runner_takes_other_work(
    api, projektor, repo, tmp_path
):
    """An issue that needs a filesystem, for an agent bound to no worktree, in a
    project with none: the server cannot resolve the run's lock."""
    project, control = api.project(), control_dir(tmp_path)
    needs_one = api.issue(project, "Needs a checkout", requires_filesystem=True)
    plain = api.issue(project, "Plain")
    done = projektor(
        "run",
        "--next",
        "--project",
        project,
        *agent_command(control),
        cwd=repo,
        agent=unique("juno"),
    )
    assert done.returncode == 0, done.stderr
    assert "could not resolve its worktree" in done.stderr
    assert read_json(control / "started.json")["env"]["PROJEKTOR_ISSUE"] == str(plain["id"])
    skipped = api.get(f"/issues/{needs_one['id']}/")
    assert skipped["status"] == "todo" and skipped["lease"] is None
    assert api.get(f"/issues/{plain['id']}/")["status"] == "in_review"


def test_a_crashed_agents_work_is_kept_on_its_branch_and_the_loop_goes_on_in_the_worktree(
    api, projektor, repo, tmp_path
):
    project, agent, control = api.project(), unique("gaia"), control_dir(tmp_path)
    issue = api.issue(project, "Crash once", requires_filesystem=True)
    runner = projektor(
        "run",
        "--loop",
        "--project",
        project,
        "--worktrees",
        str(tmp_path / "wt"),
        "--scan",
        "0",
        *agent_command(control, "--edit", "src/wip.py", "--fail-once", "--commit", "Finish it"),
        cwd=repo,
        agent=agent,
        wait=False,
    )
    wait_until(
        lambda: api.get(f"/issues/{issue['id']}/")["status"] == "in_review",
        "the loop to take the issue again after the crash and hand it in",
    )
    runner.process.send_signal(signal.SIGINT)
    assert runner.wait() == 0, runner.stderr

    assert (control / "failed-once").exists()  # the first unit crashed after its edit
    branch = f"projektor/{issue['id']}-crash-once"
    subjects = git(repo, "log", "--format=%s", branch).splitlines()
    assert subjects[:2] == [
        "Finish it",
        f"projektor: unfinished work of {agent} on issue {issue['id']} "
        "(the agent exited with status 1)",
    ]
    wip = git(repo, "show", f"{branch}:src/wip.py").splitlines()
    assert len(wip) == 2  # the second unit continued the first one's edit
    assert git(tmp_path / "wt" / agent, "status", "--porcelain") == ""
    runs = api.get("/runs/", issue=issue["id"])["results"]
    assert sorted(r["status"] for r in runs) == ["failed", "succeeded"]
