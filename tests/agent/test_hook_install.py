"""``projektor hook install|uninstall HARNESS [DIR]``: each CLI's own file, merged into
without clobbering, idempotent, ours alone taken out again, kept out of the work; and
``projektor run --hooks HARNESS[,HARNESS]|auto`` arming the agent's checkout with them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.conftest import AGENT_SCRIPT, clean_env, git
from tests.agent.test_runner import control_dir

# Each CLI's file as a team may already have it: entries of others to keep.
BEFORE = {
    "claude-code": {
        "permissions": {"allow": ["Bash(make test)"]},
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh"}]}
            ]
        },
    },
    "codex": {
        "hooks": {
            "PreToolUse": [
                {"matcher": "^Bash$", "hooks": [{"type": "command", "command": "./guard.sh"}]}
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "./notify.sh", "timeout": 5}]}],
        }
    },
    "gemini": {
        "ui": {"theme": "GitHub"},
        "hooks": {
            "BeforeTool": [
                {
                    "matcher": "run_shell_command",
                    "hooks": [
                        {
                            "name": "audit",
                            "type": "command",
                            "command": "./audit.sh",
                            "timeout": 5000,
                        }
                    ],
                }
            ]
        },
    },
    "cursor": {
        "version": 1,
        "hooks": {
            "afterFileEdit": [{"command": "./format.sh"}],
            "preToolUse": [{"command": "./audit.sh", "matcher": "Shell"}],
        },
    },
    "copilot": {
        "version": 1,
        "hooks": {"sessionStart": [{"type": "command", "bash": "./start.sh"}]},
    },
}
FILES = {
    "claude-code": ".claude/settings.local.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "cursor": ".cursor/hooks.json",
    "copilot": ".github/hooks/projektor.json",
}
# (event, matcher) of our entries; None: the CLI lists its entries without groups.
OURS = {
    "claude-code": [("PreToolUse", "Edit|Write|MultiEdit|NotebookEdit"), ("PostToolUse", "*")],
    "codex": [("PreToolUse", "apply_patch|Bash")],
    "gemini": [("BeforeTool", "write_file|replace")],
    "cursor": [("preToolUse", None)],
    "copilot": [("preToolUse", None)],
}


def projektor_hook(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "projektor_agent", "hook", *args],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def our_entries(config: dict, harness: str) -> list:
    found = []
    for event, matcher in OURS[harness]:
        for item in config["hooks"][event]:
            entries = item["hooks"] if matcher is not None else [item]
            mine = [
                e for e in entries if f"hook {harness}" in (e.get("command") or e.get("bash", ""))
            ]
            if mine:
                assert matcher is None or item["matcher"] == matcher
                found += mine
    return found


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("a repository\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "Start")
    return root


@pytest.mark.parametrize("harness", list(FILES))
def test_install_merges_once_and_uninstall_takes_out_only_ours(checkout, harness):
    settings = checkout / FILES[harness]
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps(BEFORE[harness]))
    for _ in range(2):
        done = projektor_hook("install", harness, str(checkout))
        assert done.returncode == 0, done.stderr
    merged = json.loads(settings.read_text())
    assert len(our_entries(merged, harness)) == len(OURS[harness])
    others = {key: value for key, value in merged.items() if key != "hooks"}
    assert others == {key: value for key, value in BEFORE[harness].items() if key != "hooks"}
    for event, items in BEFORE[harness]["hooks"].items():
        assert all(item in merged["hooks"][event] for item in items), event
    assert ("trust" in done.stdout) == (harness in ("codex", "gemini")), done.stdout
    assert git(checkout, "status", "--porcelain") == ""  # kept out of the work

    # The command it wrote runs: outside a runner it lets every edit through in silence.
    command = (
        our_entries(merged, harness)[0].get("command") or our_entries(merged, harness)[0]["bash"]
    )
    ran = subprocess.run(
        command, shell=True, input="{}", env=clean_env(), capture_output=True, text=True
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")

    done = projektor_hook("uninstall", harness, str(checkout))
    assert done.returncode == 0 and "removed from" in done.stdout, done.stderr
    assert json.loads(settings.read_text()) == BEFORE[harness]
    again = projektor_hook("uninstall", harness, str(checkout))
    assert again.returncode == 0 and "none in" in again.stdout


@pytest.mark.parametrize("harness", list(FILES))
def test_a_file_it_created_goes_with_its_folders(checkout, harness):
    assert projektor_hook("install", harness, str(checkout)).returncode == 0
    written = json.loads((checkout / FILES[harness]).read_text())
    if harness in ("cursor", "copilot"):
        assert written["version"] == 1
    entry = our_entries(written, harness)[0]
    timeouts = {
        "codex": ("timeout", 60),
        "gemini": ("timeout", 60000),
        "copilot": ("timeoutSec", 60),
    }
    if harness in timeouts:
        key, value = timeouts[harness]
        assert entry[key] == value
    assert projektor_hook("uninstall", harness, str(checkout)).returncode == 0
    top = FILES[harness].split("/")[0]
    assert not (checkout / top).exists()
    assert git(checkout, "status", "--porcelain") == ""


def test_a_tracked_settings_file_stays_out_of_the_work_and_comes_back_byte_for_byte(checkout):
    settings = checkout / ".gemini" / "settings.json"
    settings.parent.mkdir()
    original = '{\n    "ui": {"theme": "GitHub"}\n}\n'  # a team's own formatting
    settings.write_text(original)
    git(checkout, "add", ".gemini/settings.json")
    git(checkout, "commit", "-q", "-m", "The team's Gemini settings")
    assert projektor_hook("install", "gemini", str(checkout)).returncode == 0
    assert "hook gemini" in settings.read_text()
    assert git(checkout, "status", "--porcelain") == ""  # skip-worktree: no change to commit
    assert git(checkout, "ls-files", "-v", ".gemini/settings.json").startswith("S ")
    git(checkout, "add", "-A")
    assert git(checkout, "diff", "--cached", "--name-only") == ""
    assert projektor_hook("uninstall", "gemini", str(checkout)).returncode == 0
    assert settings.read_text() == original
    assert git(checkout, "ls-files", "-v", ".gemini/settings.json").startswith("H ")


def test_a_file_it_cannot_read_is_left_alone_and_named(checkout):
    settings = checkout / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{broken")
    done = projektor_hook("install", "gemini", str(checkout))
    assert done.returncode == 2 and "not valid JSON" in done.stderr
    assert settings.read_text() == "{broken"
    assert projektor_hook("install", "aider", str(checkout)).returncode == 2


# --- projektor run --hooks ---------------------------------------------------------------------


def stand_in(tmp_path: Path, name: str, control: Path) -> Path:
    """An executable called ``name`` (the CLI ``--hooks auto`` looks for): it copies the
    CLIs' files it finds in its checkout to CONTROL/seen/, then is the scripted agent."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    program = folder / name
    program.write_text(
        "#!/bin/sh\n"
        f'mkdir -p "{control}/seen"\n'
        "for f in .claude .codex .gemini .cursor .github; do\n"
        f'  [ -e "$f" ] && cp -R "$f" "{control}/seen/"\n'
        "done\n"
        f'exec "{sys.executable}" "{AGENT_SCRIPT}" "{control}" "$@"\n'
    )
    program.chmod(0o755)
    return program


def test_hooks_auto_arms_the_cli_the_command_runs_and_leaves_a_users_checkout_as_found(
    api, projektor, repo, tmp_path
):
    issue = api.issue(api.project(), "Add the login")
    control = control_dir(tmp_path)
    codex = stand_in(tmp_path, "codex", control)
    done = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--hooks",
        "auto",
        "--",
        str(codex),
        "--edit",
        "src/login.py",
        "--commit",
        "Add the login",
        cwd=repo,
        agent="daphne",
    )
    assert done.returncode == 0, done.stderr
    assert "trust" in done.stderr  # Codex asks the user to trust the hook: said at the start
    seen = json.loads((control / "seen" / ".codex" / "hooks.json").read_text())
    assert len(our_entries(seen, "codex")) == 1
    assert not (repo / ".codex").exists()  # a checkout the runner did not create: as found
    assert git(repo, "show", "--name-only", "--format=", "HEAD") == "src/login.py"
    assert git(repo, "status", "--porcelain") == ""


def test_hooks_of_several_clis_stay_in_the_runners_worktree_out_of_the_work(
    api, projektor, repo, tmp_path
):
    issue = api.issue(api.project(), "Add the logout", requires_filesystem=True)
    control = control_dir(tmp_path)
    agent = stand_in(tmp_path, "my-agent", control)
    done = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--worktrees",
        str(tmp_path / "wt"),
        "--hooks",
        "gemini,cursor,copilot",
        "--",
        str(agent),
        "--edit",
        "src/logout.py",
        "--commit",
        "Add the logout",
        cwd=repo,
        agent="eos",
    )
    assert done.returncode == 0, done.stderr
    worktree = tmp_path / "wt" / "eos"
    for harness in ("gemini", "cursor", "copilot"):
        assert len(our_entries(json.loads((worktree / FILES[harness]).read_text()), harness)) == 1
        assert (control / "seen" / FILES[harness]).exists()
    assert git(worktree, "status", "--porcelain") == ""
    branch = next(
        b for b in git(repo, "branch", "--format=%(refname:short)").split() if "logout" in b
    )
    assert git(repo, "show", "--name-only", "--format=", branch) == "src/logout.py"


def test_hooks_it_cannot_tell_or_does_not_know_take_nothing(api, projektor, repo, tmp_path):
    issue = api.issue(api.project(), "Add nothing")
    control = control_dir(tmp_path)
    for hooks in ("auto", "claude-code,aider"):
        done = projektor(
            "run",
            "--issue",
            str(issue["id"]),
            "--hooks",
            hooks,
            "--",
            str(stand_in(tmp_path, "my-agent", control)),
            cwd=repo,
            agent="hermes",
        )
        assert done.returncode == 2, done.stderr
        assert "--hooks auto" in done.stderr or "aider" in done.stderr
    assert api.leases(issue["id"]) == []
