"""``projektor hook claude-code`` with payloads of the shape Claude Code documents
(recorded in payloads/), against a live server; and ``hook install claude-code``."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.conftest import clean_env, unique, wait_until

PAYLOADS = Path(__file__).with_name("payloads")
CLOSED_PORT_URL = "http://127.0.0.1:9"  # discard: nothing listens there


def payload(name: str, worktree: Path) -> str:
    return (PAYLOADS / f"{name}.json").read_text().replace("WORKTREE", str(worktree))


@pytest.fixture
def work(api, live, repo):
    """A session working on one issue in ``repo``; another issue holds src/app.py."""
    project = api.project()
    mine, theirs = api.issue(project, "Mine"), api.issue(project, "Theirs")
    started = api.post("/work/start/", {"agent": unique("hermes"), "issue": mine["id"]}, expect=201)
    rival = unique("atlas")
    api.post(
        "/work/start/", {"agent": rival, "issue": theirs["id"], "paths": ["src/app.py"]}, expect=201
    )
    env = {
        "PROJEKTOR_URL": live.url,
        "PROJEKTOR_API_KEY": api.key,
        "PROJEKTOR_SESSION": str(started["session"]["id"]),
        "PROJEKTOR_ISSUE": str(mine["id"]),
        "PROJEKTOR_FENCE": str(started["lease"]["fence"]),
    }
    return {"env": env, "issue": mine, "theirs": theirs, "rival": rival, "repo": repo}


def hook(stdin: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "projektor_agent", "hook", "claude-code"],
        input=stdin,
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def claimed(api, issue: dict) -> set:
    rows = api.get("/file-claims/", issue=issue["id"], active="true")["results"]
    return {row["path"] for row in rows}


def test_an_edit_claims_the_file_relative_to_the_worktree_before_it_happens(api, work):
    repo = work["repo"]
    for name in ("pre_tool_use_write", "pre_tool_use_notebook_edit"):
        done = hook(payload(name, repo), work["env"], repo)
        assert done.returncode == 0, done.stderr
    assert claimed(api, work["issue"]) == {"src/new_module.py", "notebooks/analysis.ipynb"}


def test_a_file_another_issue_holds_is_refused_with_a_sentence_the_model_can_act_on(api, work):
    repo = work["repo"]
    done = hook(payload("pre_tool_use_edit", repo), work["env"], repo)
    assert done.returncode == 2
    assert (
        f"src/app.py is claimed by issue {work['theirs']['id']} (agent {work['rival']}, live)"
        in done.stderr
    )
    assert f"projektor message agent:{work['rival']}" in done.stderr
    assert "Traceback" not in done.stderr
    assert "src/app.py" not in claimed(api, work["issue"])


def test_outside_the_worktree_other_tools_and_outside_a_runner_nothing_is_claimed(api, work):
    repo = work["repo"]
    for name in ("pre_tool_use_multi_edit", "pre_tool_use_bash", "post_tool_use_write"):
        done = hook(payload(name, repo), work["env"], repo)
        assert done.returncode == 0, (name, done.stderr)
    outside = {k: v for k, v in work["env"].items() if k != "PROJEKTOR_SESSION"}
    done = hook(payload("pre_tool_use_edit", repo), outside, repo)
    assert done.returncode == 0 and done.stderr == ""
    assert claimed(api, work["issue"]) == set()


def test_an_unreachable_server_or_a_broken_payload_fails_open_unless_strict(work):
    repo = work["repo"]
    away = {**work["env"], "PROJEKTOR_URL": CLOSED_PORT_URL}
    done = hook(payload("pre_tool_use_write", repo), away, repo)
    assert done.returncode == 0 and "warning" in done.stderr and "Traceback" not in done.stderr
    strict = hook(payload("pre_tool_use_write", repo), {**away, "PROJEKTOR_STRICT": "1"}, repo)
    assert strict.returncode == 2 and "PROJEKTOR_STRICT=1" in strict.stderr
    broken = hook("{not json", work["env"], repo)
    assert broken.returncode == 0 and "warning" in broken.stderr
    assert "Traceback" not in broken.stderr
    broken_strict = hook("{not json", {**work["env"], "PROJEKTOR_STRICT": "1"}, repo)
    assert broken_strict.returncode == 2


def test_a_session_paused_past_the_ttl_heartbeats_once_and_claims(api, work):
    repo, session = work["repo"], int(work["env"]["PROJEKTOR_SESSION"])
    wait_until(lambda: not api.session(session)["live"], "the session to go stale")
    done = hook(payload("pre_tool_use_write", repo), work["env"], repo)
    assert done.returncode == 0, done.stderr
    assert "src/new_module.py" in claimed(api, work["issue"])
    assert api.session(session)["live"]


def test_an_ended_session_tells_the_model_its_work_is_over(api, work):
    repo, session = work["repo"], int(work["env"]["PROJEKTOR_SESSION"])
    api.post(f"/sessions/{session}/end/", expect=200)
    done = hook(payload("pre_tool_use_write", repo), work["env"], repo)
    assert done.returncode == 2
    assert f"your work on issue {work['issue']['id']} is over" in done.stderr


def test_install_merges_into_the_settings_without_clobbering_or_duplicating(tmp_path):
    settings = tmp_path / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    theirs = {"type": "command", "command": "./lint.sh"}
    settings.write_text(
        json.dumps(
            {
                "permissions": {"allow": ["Bash(make test)"]},
                "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [theirs]}]},
            }
        )
    )
    for _ in range(2):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "projektor_agent",
                "hook",
                "install",
                "claude-code",
                str(tmp_path),
            ],
            env=clean_env(),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    merged = json.loads(settings.read_text())
    assert merged["permissions"] == {"allow": ["Bash(make test)"]}
    pre = merged["hooks"]["PreToolUse"]
    assert pre[0] == {"matcher": "Bash", "hooks": [theirs]}
    ours = [g for g in pre if "hook claude-code" in json.dumps(g)]
    assert len(ours) == 1 and ours[0]["matcher"] == "Edit|Write|MultiEdit|NotebookEdit"
    post = merged["hooks"]["PostToolUse"]
    assert len(post) == 1 and "hook claude-code" in post[0]["hooks"][0]["command"]

    settings.write_text("{broken")
    done = subprocess.run(
        [sys.executable, "-m", "projektor_agent", "hook", "install", "claude-code", str(tmp_path)],
        env=clean_env(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "not valid JSON" in done.stderr
    assert settings.read_text() == "{broken"


def test_a_hook_command_line_it_cannot_read_lets_the_edit_through_with_a_warning(api, work):
    repo = work["repo"]
    for words in (["claude"], [], ["claude-code", "extra"]):
        done = subprocess.run(
            [sys.executable, "-m", "projektor_agent", "hook", *words],
            input=payload("pre_tool_use_edit", repo),
            cwd=repo,
            env=clean_env(**work["env"]),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stdout) == (0, ""), (words, done.stderr)
        assert "warning:" in done.stderr and "Traceback" not in done.stderr, words
    assert claimed(api, work["issue"]) == set()
    strict = subprocess.run(
        [sys.executable, "-m", "projektor_agent", "hook", "claude"],
        input="{}",
        env=clean_env(**work["env"], PROJEKTOR_STRICT="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert strict.returncode == 2 and "no agent CLI named 'claude'" in strict.stderr
    install = subprocess.run(
        [sys.executable, "-m", "projektor_agent", "hook", "install", "claude"],
        cwd=repo,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert install.returncode == 2 and "usage: projektor hook install" in install.stderr
