"""Claims follow the edits: ``projektor run --scan`` claims what the agent changed in
its worktree whatever it claimed itself (new files, both sides of a rename, a
deletion), and a path another issue holds is told and settled at the hand-in
(``--on-conflict fail`` gives the issue back; ``wait`` waits for the holder)."""

from pathlib import Path

from tests.agent.conftest import agent_command, git, released, unique, wait_until
from tests.agent.test_runner import control_dir, started


def scanning(projektor, repo, tmp_path, issue, agent, control, *behaviour, extra=()):
    return projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--worktrees",
        str(tmp_path / "wt"),
        "--scan",
        "0.3",
        *extra,
        *agent_command(control, *behaviour),
        cwd=repo,
        agent=agent,
        wait=False,
    )


def claimed(api, issue) -> set:
    rows = api.get("/file-claims/", issue=issue["id"], active="true")["results"]
    return {row["path"] for row in rows}


def rival_holding(api, project, path) -> tuple[dict, str]:
    """Another issue, started by another agent, holding ``path``."""
    theirs, rival = api.issue(project, "Theirs"), unique("rival")
    body = {"agent": rival, "issue": theirs["id"], "paths": [path]}
    api.post("/work/start/", body, expect=201)
    return theirs, rival


def test_the_scan_claims_new_files_both_sides_of_a_rename_and_a_deletion(
    api, projektor, repo, tmp_path
):
    project, agent, control = api.project(), unique("nyx"), control_dir(tmp_path)
    issue = api.issue(project, "Move things", requires_filesystem=True)
    runner = scanning(projektor, repo, tmp_path, issue, agent, control, "--wait")
    worktree = Path(started(control, runner)["cwd"])
    git(worktree, "mv", "src/app.py", "src/main.py")
    git(worktree, "commit", "-q", "-m", "Rename the app")  # committed: seen from the fork
    (worktree / "README.md").unlink()  # deleted, not committed
    (worktree / "docs").mkdir()
    (worktree / "docs" / "new.md").write_text("untracked, in a new directory\n")

    expected = {"src/app.py", "src/main.py", "README.md", "docs/new.md"}
    wait_until(lambda: claimed(api, issue) >= expected, "the scan to claim what changed")
    assert runner.process.poll() is None  # while the agent still works
    released(control)
    assert runner.wait() == 0, runner.stderr
    assert api.get(f"/issues/{issue['id']}/")["status"] == "in_review"
    assert not [p for p in expected if p.startswith(".projektor")]


def test_a_path_held_by_another_issue_is_told_and_fails_the_unit_with_on_conflict_fail(
    api, projektor, repo, tmp_path
):
    project, agent, control = api.project(), unique("oreas"), control_dir(tmp_path)
    issue = api.issue(project, "Touch the app", requires_filesystem=True)
    theirs, rival = rival_holding(api, project, "src/app.py")
    runner = scanning(
        projektor,
        repo,
        tmp_path,
        issue,
        agent,
        control,
        "--edit",
        "src/app.py",
        "--edit",
        "src/mine.py",
        extra=("--on-conflict", "fail"),
    )
    assert runner.wait() == 1, runner.stderr

    told = f"src/app.py was changed in the worktree but is claimed by issue {theirs['id']}"
    assert told in runner.stderr
    inbox = api.get("/messages/", scope=f"agent:{agent}")["results"]
    assert any(told in m["body"] and f"agent {rival}" in m["body"] for m in inbox)
    back = api.get(f"/issues/{issue['id']}/")
    assert back["status"] == "todo" and back["lease"] is None
    [message] = [body for body in api.messages(issue["id"]) if "gave issue" in body]
    assert f"src/app.py (issue {theirs['id']})" in message
    held = api.get("/file-claims/", issue=theirs["id"], active="true")["results"]
    assert [c["path"] for c in held] == ["src/app.py"]  # never forced
    logged = api.get("/claim-conflicts/", issue=issue["id"])["results"]
    assert any(
        (c["path"], c["rejected_issue"], c["holding_issue"])
        == ("src/app.py", issue["id"], theirs["id"])
        for c in logged
    )


def test_with_on_conflict_wait_the_hand_in_waits_until_the_holder_releases(
    api, projektor, repo, tmp_path
):
    project, agent, control = api.project(), unique("pax"), control_dir(tmp_path)
    issue = api.issue(project, "Wait for the app", requires_filesystem=True)
    theirs, _ = rival_holding(api, project, "src/app.py")
    runner = scanning(projektor, repo, tmp_path, issue, agent, control, "--edit", "src/app.py")
    wait_until(lambda: "the hand-in waits" in runner.stderr, "the hand-in to wait")
    assert runner.process.poll() is None

    api.post("/file-claims/release/", {"issue": theirs["id"]}, expect=200)
    assert runner.wait() == 0, runner.stderr
    assert api.get(f"/issues/{issue['id']}/")["status"] == "in_review"
    # The claim was taken, at the last scan, before the hand-in released it.
    rows = api.get("/file-claims/", issue=issue["id"])["results"]
    assert [r["path"] for r in rows] == ["src/app.py"]
