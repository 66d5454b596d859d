"""``projektor run --integrate``: the issue's branch landed on the default branch under
the lease and claims, one integration at a time per project (a run on the project's
primary worktree), and a rebase that conflicts given back with main untouched."""

from datetime import datetime
from pathlib import Path

from tests.agent.conftest import agent_command, git, released, unique
from tests.agent.test_runner import started


def project_with_primary(api, repo: Path) -> tuple[str, str]:
    """A project whose primary worktree is the main checkout ``repo``: (key, slug)."""
    slug = unique("primary")
    api.post("/worktrees/", {"slug": slug, "name": "Main", "path": str(repo)}, expect=201)
    key = unique("p")
    body = {"key": key, "name": key, "agent_wip_limit": 10, "primary_worktree": slug}
    api.post("/projects/", body, expect=201)
    return key, slug


def control_of(tmp_path: Path, agent: str) -> Path:
    control = tmp_path / f"control-{agent}"
    control.mkdir(exist_ok=True)
    return control


def integrating(projektor, repo, tmp_path, issue, agent, *behaviour, extra=()):
    """``projektor run --integrate`` on ``issue`` as ``agent``, not waited for."""
    return projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--worktrees",
        str(tmp_path / "wt"),
        "--integrate",
        "--scan",
        "0",
        *extra,
        *agent_command(control_of(tmp_path, agent), *behaviour),
        cwd=repo,
        agent=agent,
        wait=False,
    )


def commit_on_main(repo: Path, path: str, text: str, subject: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", subject)
    return git(repo, "rev-parse", "HEAD")


def runs_on(api, issue, worktree):
    return [r for r in api.get("/runs/", issue=issue["id"])["results"] if r["worktree"] == worktree]


def test_the_branch_lands_on_main_rebased_onto_what_main_got_meanwhile(
    api, projektor, repo, tmp_path
):
    (project, primary), agent = project_with_primary(api, repo), unique("iris")
    issue = api.issue(project, "Add a feature", requires_filesystem=True)
    verified = tmp_path / "verified"
    runner = integrating(
        projektor,
        repo,
        tmp_path,
        issue,
        agent,
        "--wait",
        "--edit",
        "src/feature.py",
        "--commit",
        "Add the feature",
        extra=("--verify", f"test -f src/feature.py && git rev-parse HEAD >> {verified}"),
    )
    started(control_of(tmp_path, agent), runner)
    other = commit_on_main(repo, "docs/other.md", "meanwhile\n", "Another change on main")
    released(control_of(tmp_path, agent))
    assert runner.wait() == 0, runner.stderr

    landed = git(repo, "rev-parse", "main")
    assert git(repo, "log", "-1", "--format=%s", "main") == "Add the feature"
    assert git(repo, "rev-parse", "main~1") == other  # rebased: a straight line, no merge
    assert (repo / "src" / "feature.py").exists()  # the main checkout moved with its branch
    assert git(repo, "status", "--porcelain") == ""
    handed = api.get(f"/issues/{issue['id']}/")
    assert handed["status"] == "in_review"
    assert f"Landed on main: {landed}" in handed["report"]["summary"]
    assert "- Add the feature" in handed["report"]["summary"]
    [integration] = runs_on(api, issue, primary)
    assert (integration["lock_mode"], integration["status"]) == ("exclusive", "succeeded")
    assert runs_on(api, issue, agent)[0]["status"] == "succeeded"
    # Verified before the rebase, and again on what landed, since the rebase moved it.
    assert verified.read_text().split()[-1] == landed
    assert len(verified.read_text().split()) == 2


def test_two_runners_integrating_at_once_take_turns_and_lose_no_commit(
    api, projektor, repo, tmp_path
):
    (project, primary), agents = project_with_primary(api, repo), [unique("juno"), unique("kore")]
    issues = [
        api.issue(project, f"Feature {n}", requires_filesystem=True) for n in range(len(agents))
    ]
    runners = [
        integrating(
            projektor,
            repo,
            tmp_path,
            issue,
            agent,
            "--wait",
            "--edit",
            f"src/feature_{n}.py",
            "--commit",
            f"Add feature {n}",
            extra=("--verify", "sleep 0.3"),  # an integration long enough to overlap
        )
        for n, (issue, agent) in enumerate(zip(issues, agents, strict=True))
    ]
    for agent, runner in zip(agents, runners, strict=True):
        started(control_of(tmp_path, agent), runner)
    for agent in agents:
        released(control_of(tmp_path, agent))
    for runner in runners:
        assert runner.wait() == 0, runner.stderr

    subjects = git(repo, "log", "--format=%s", "main").splitlines()
    assert sorted(subjects[:2]) == ["Add feature 0", "Add feature 1"]
    assert subjects[2] == "Initial commit"
    integrations = [runs_on(api, issue, primary) for issue in issues]
    spans = []
    for runs in integrations:
        succeeded = [r for r in runs if r["status"] == "succeeded"]
        assert len(succeeded) == 1, runs
        spans.append(
            (
                datetime.fromisoformat(succeeded[0]["started_at"]),
                datetime.fromisoformat(succeeded[0]["finished_at"]),
            )
        )
    first, second = sorted(spans)
    assert first[1] <= second[0]  # one integration at a time: the lock was held in turn
    for issue in issues:
        assert api.get(f"/issues/{issue['id']}/")["status"] == "in_review"


def test_a_conflicting_rebase_is_a_failed_run_naming_the_file_and_main_is_untouched(
    api, projektor, repo, tmp_path
):
    (project, primary), agent = project_with_primary(api, repo), unique("leda")
    issue = api.issue(project, "Change the app", requires_filesystem=True)
    runner = integrating(
        projektor,
        repo,
        tmp_path,
        issue,
        agent,
        "--wait",
        "--edit",
        "src/app.py",
        "--commit",
        "Change the app",
        extra=("--paths", "src/app.py"),  # claimed from the start: no fresh base before
    )
    started(control_of(tmp_path, agent), runner)
    # Someone who ignores the claims changes main under it: only the landing can tell.
    theirs = commit_on_main(repo, "src/app.py", "print('theirs')\n", "Their change to the app")
    released(control_of(tmp_path, agent))
    assert runner.wait() == 1, runner.stderr

    assert git(repo, "rev-parse", "main") == theirs
    assert git(repo, "status", "--porcelain") == ""
    branch = f"projektor/{issue['id']}-change-the-app"
    assert git(repo, "log", "-1", "--format=%s", branch) == "Change the app"  # kept
    worktree = tmp_path / "wt" / agent
    assert git(worktree, "status", "--porcelain") == ""  # the rebase aborted, not half-done
    back = api.get(f"/issues/{issue['id']}/")
    assert back["status"] == "todo" and back["lease"] is None
    [message] = [body for body in api.messages(issue["id"]) if "gave issue" in body]
    assert "conflicts in src/app.py" in message and "not integrated" in message
    assert [r["status"] for r in runs_on(api, issue, primary)] == ["failed"]
    assert "conflicts in src/app.py" in runner.stderr


def test_without_a_primary_worktree_the_branch_lands_by_git_alone(api, projektor, repo, tmp_path):
    project, agent = api.project(), unique("maia")
    issue = api.issue(project, "Add notes", requires_filesystem=True)
    git(repo, "checkout", "-q", "-b", "elsewhere")  # main checked out nowhere: update-ref
    runner = integrating(
        projektor, repo, tmp_path, issue, agent, "--edit", "notes.md", "--commit", "Add notes"
    )
    assert runner.wait() == 0, runner.stderr

    assert "has no primary worktree" in runner.stderr
    assert git(repo, "log", "-1", "--format=%s", "main") == "Add notes"
    assert git(repo, "branch", "--show-current") == "elsewhere"
    assert not (repo / "notes.md").exists()
    assert api.get(f"/issues/{issue['id']}/")["status"] == "in_review"
    assert api.get("/file-claims/", issue=issue["id"])["results"] == []  # --scan 0: off


def test_with_a_remote_the_branch_is_rebased_onto_its_default_branch_and_pushed(
    api, projektor, repo, tmp_path
):
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "fetch", "-q", "origin")
    other = tmp_path / "other"  # someone else pushes meanwhile, from another clone
    git(tmp_path, "clone", "-q", str(origin), str(other))
    (project, _), agent = project_with_primary(api, repo), unique("nike")
    issue = api.issue(project, "Push it", requires_filesystem=True)
    runner = integrating(
        projektor, repo, tmp_path, issue, agent, "--wait", "--edit", "pushed.md", "--commit", "Push"
    )
    started(control_of(tmp_path, agent), runner)
    theirs = commit_on_main(other, "theirs.md", "pushed first\n", "Theirs")
    git(other, "push", "-q", "origin", "main")
    released(control_of(tmp_path, agent))
    assert runner.wait() == 0, runner.stderr

    landed = git(origin, "rev-parse", "main")
    assert git(origin, "log", "-1", "--format=%s", "main") == "Push"
    assert git(origin, "rev-parse", "main~1") == theirs
    assert f"Landed on main: {landed}" in api.get(f"/issues/{issue['id']}/")["report"]["summary"]
