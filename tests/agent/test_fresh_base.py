"""Fresh base: a claim on a path that the default branch changed since the branch point
first brings the branch up to date (a rebase, the uncommitted work carried across),
in the edit-time hook and in the runner's scan; a rebase that cannot be made clean is
undone, told, and the claim not used."""

import http.server
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.agent.conftest import agent_command, git, released, unique
from tests.agent.test_hook import claimed, hook
from tests.agent.test_runner import control_dir, started

LINES = "".join(f"line {n}\n" for n in range(1, 11))


def commit(cwd: Path, path: str, text: str, subject: str) -> str:
    (cwd / path).write_text(text)
    git(cwd, "add", path)
    git(cwd, "commit", "-q", "-m", subject)
    return git(cwd, "rev-parse", "HEAD")


def edit_payload(worktree: Path, path: str) -> str:
    return json.dumps(
        {
            "hook_event_name": "PreToolUse",
            "tool_name": "Edit",
            "tool_input": {"file_path": str(worktree / path), "old_string": "a", "new_string": "b"},
            "cwd": str(worktree),
        }
    )


def branch_work(api, live, repo, tmp_path):
    """A session on an issue, its branch checked out in a worktree of ``repo`` made
    before main moves on; the hook's environment as the runner sets it."""
    commit(repo, "notes.md", LINES, "Notes")
    worktree = tmp_path / "feature"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(worktree), "main")
    issue = api.issue(api.project(), "Edit the notes")
    started = api.post("/work/start/", {"agent": unique("rhea"), "issue": issue["id"]}, expect=201)
    env = {
        "PROJEKTOR_URL": live.url,
        "PROJEKTOR_API_KEY": api.key,
        "PROJEKTOR_SESSION": str(started["session"]["id"]),
        "PROJEKTOR_ISSUE": str(issue["id"]),
        "PROJEKTOR_FENCE": str(started["lease"]["fence"]),
        "PROJEKTOR_WORKTREE": str(worktree),
        "PROJEKTOR_BASE": "refs/heads/main",
    }
    return issue, worktree, env


def test_the_hook_rebases_a_stale_file_before_the_edit_and_the_dirty_work_survives(
    api, live, repo, tmp_path
):
    issue, worktree, env = branch_work(api, live, repo, tmp_path)
    moved = commit(repo, "notes.md", LINES.replace("line 1\n", "line one\n"), "Main's notes")
    (worktree / "src" / "app.py").write_text("the agent's uncommitted work\n")
    (worktree / "scratch.txt").write_text("untracked\n")

    done = hook(edit_payload(worktree, "notes.md"), env, worktree)

    assert done.returncode == 0, done.stderr
    assert claimed(api, issue) == {"notes.md"}
    assert git(worktree, "rev-parse", "HEAD") == moved  # the branch is on main now
    assert (worktree / "notes.md").read_text().startswith("line one\n")
    assert (worktree / "src" / "app.py").read_text() == "the agent's uncommitted work\n"
    assert (worktree / "scratch.txt").read_text() == "untracked\n"
    assert git(worktree, "stash", "list") == ""


def test_the_hook_refuses_an_edit_whose_rebase_conflicts_and_releases_the_claim(
    api, live, repo, tmp_path
):
    issue, worktree, env = branch_work(api, live, repo, tmp_path)
    before = git(worktree, "rev-parse", "HEAD")
    commit(repo, "notes.md", LINES.replace("line 1\n", "main's line\n"), "Main's notes")
    mine = LINES.replace("line 1\n", "my line\n")
    (worktree / "notes.md").write_text(mine)  # uncommitted, against main's change

    done = hook(edit_payload(worktree, "notes.md"), env, worktree)

    assert done.returncode == 2
    assert "notes.md changed on main since your branch started" in done.stderr
    assert "conflicts in notes.md" in done.stderr and "Traceback" not in done.stderr
    assert claimed(api, issue) == set()
    assert git(worktree, "rev-parse", "HEAD") == before  # as it was
    assert (worktree / "notes.md").read_text() == mine
    assert git(worktree, "diff", "--name-only") == "notes.md"  # unstaged, as it was
    assert git(worktree, "diff", "--cached", "--name-only") == ""
    assert git(worktree, "stash", "list") == ""


def test_the_scan_rebases_before_claiming_a_path_main_changed(api, projektor, repo, tmp_path):
    commit(repo, "notes.md", LINES, "Notes")
    project, agent, control = api.project(), unique("selene"), control_dir(tmp_path)
    issue = api.issue(project, "Append a note", requires_filesystem=True)
    runner = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--worktrees",
        str(tmp_path / "wt"),
        *agent_command(control, "--wait", "--edit", "notes.md"),  # appended, uncommitted
        cwd=repo,
        agent=agent,
        wait=False,
    )
    worktree = Path(started(control, runner)["cwd"])
    moved = commit(repo, "notes.md", LINES.replace("line 1\n", "line one\n"), "Main's notes")
    released(control)
    assert runner.wait() == 0, runner.stderr

    assert "notes.md changed on the default branch since the branch point" in runner.stderr
    assert git(worktree, "merge-base", "HEAD", "main") == moved
    text = (worktree / "notes.md").read_text()
    assert text.startswith("line one\n") and "edited by the scripted agent" in text
    rows = api.get("/file-claims/", issue=issue["id"])["results"]
    assert [r["path"] for r in rows] == ["notes.md"]


def test_the_scan_gives_back_a_path_whose_rebase_conflicts(api, projektor, repo, tmp_path):
    commit(repo, "notes.md", "one line\n", "Notes")
    project, agent, control = api.project(), unique("theia"), control_dir(tmp_path)
    issue = api.issue(project, "Append a note", requires_filesystem=True)
    runner = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--worktrees",
        str(tmp_path / "wt"),
        *agent_command(control, "--wait", "--edit", "notes.md"),
        cwd=repo,
        agent=agent,
        wait=False,
    )
    started(control, runner)
    commit(repo, "notes.md", "one line\nmain's line\n", "Main's notes")
    released(control)
    assert runner.wait() == 1, runner.stderr

    assert "cannot be rebased onto it cleanly (conflicts in notes.md)" in runner.stderr
    [message] = [body for body in api.messages(issue["id"]) if "gave issue" in body]
    assert "cannot be rebased onto the default branch cleanly: notes.md" in message
    branch = f"projektor/{issue['id']}-append-a-note"
    kept = git(repo, "show", f"{branch}:notes.md")
    assert "edited by the scripted agent" in kept and "main's line" not in kept


class LandsDuringTheClaim(http.server.BaseHTTPRequestHandler):
    """Forwards every call to the live server; just before the claim it lands another
    issue's change to the claimed file on main, as a landing that let go of the file a
    moment before this claim took it."""

    upstream = ""
    land: Callable[[], None] = staticmethod(lambda: None)

    def do_GET(self) -> None:
        self.forward()

    def do_POST(self) -> None:
        if self.path.endswith("/file-claims/"):
            type(self).land()
        self.forward()

    def forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        request = urllib.request.Request(
            self.upstream + self.path, data=body, headers=headers, method=self.command
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                status, data = answer.status, answer.read()
                kind = answer.headers.get("Content-Type", "application/json")
        except urllib.error.HTTPError as error:
            status, data = error.code, error.read()
            kind = error.headers.get("Content-Type", "application/json")
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_a_file_main_changes_while_the_hook_claims_it_is_rebased_onto(api, live, repo, tmp_path):
    """What the default branch changed is read after the claim: a change that lands
    between the hook's first look and its claim still brings the branch up to date."""
    issue, worktree, env = branch_work(api, live, repo, tmp_path)
    moved: list[str] = []

    def land() -> None:
        if not moved:
            moved.append(commit(repo, "notes.md", LINES.replace("line 2\n", "two\n"), "Landed"))

    handler = type("Handler", (LandsDuringTheClaim,), {"upstream": live.url, "land": land})
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        host, port = proxy.server_address[:2]
        done = hook(
            edit_payload(worktree, "notes.md"),
            {**env, "PROJEKTOR_URL": f"http://{host}:{port}"},
            worktree,
        )
    finally:
        proxy.shutdown()
        proxy.server_close()

    assert done.returncode == 0, done.stderr
    assert moved, "the claim went through the proxy"
    assert claimed(api, issue) == {"notes.md"}
    assert git(worktree, "rev-parse", "HEAD") == moved[0]  # rebased onto what landed
    assert (worktree / "notes.md").read_text() == LINES.replace("line 2\n", "two\n")
