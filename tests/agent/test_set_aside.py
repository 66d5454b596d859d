"""A stopped agent's uncommitted edits in a checkout the runner did not create are set
aside with git stash, named on the runner's stderr and in the issue's message, so the
next unit there starts clean (and a user's own edits that stayed as they were are
left alone)."""

from tests.agent.conftest import agent_command, git, unique
from tests.agent.test_runner import control_dir


def test_a_failed_agents_edits_are_stashed_and_the_next_unit_starts_clean(
    api, projektor, repo, tmp_path
):
    project, agent = api.project(), unique("janus")
    first, second = api.issue(project, "Fail"), api.issue(project, "Succeed")
    failed = projektor(
        "run",
        "--issue",
        str(first["id"]),
        *agent_command(control_dir(tmp_path), "--edit", "src/app.py", "--edit", "new.txt"),
        "--exit",
        "3",
        cwd=repo,
        agent=agent,
    )
    assert failed.returncode == 1, failed.stderr
    assert git(repo, "status", "--porcelain") == ""
    [stash] = git(repo, "stash", "list", "--format=%s").splitlines()
    assert f"issue {first['id']}" in stash and agent in stash
    assert "set aside with git stash" in failed.stderr
    [message] = [body for body in api.messages(first["id"]) if "gave issue" in body]
    assert "set aside with git stash" in message and f"issue {first['id']}" in message
    assert "edited by the scripted agent" in git(repo, "stash", "show", "-p", "--include-untracked")

    done = projektor(
        "run",
        "--issue",
        str(second["id"]),
        *agent_command(control_dir(tmp_path), "--edit", "src/other.py", "--commit", "Other"),
        cwd=repo,
        agent=agent,
    )
    assert done.returncode == 0, done.stderr
    assert git(repo, "show", "--name-only", "--format=", "HEAD") == "src/other.py"


def test_a_users_own_edits_that_the_agent_left_alone_are_not_stashed(
    api, projektor, repo, tmp_path
):
    (repo / "README.md").write_text("the user's own edit\n")
    issue = api.issue(api.project())
    failed = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        *agent_command(control_dir(tmp_path), "--exit", "3"),
        cwd=repo,
        agent=unique("janus"),
    )
    assert failed.returncode == 1, failed.stderr
    assert git(repo, "status", "--porcelain") == "M README.md"
    assert git(repo, "stash", "list") == ""
