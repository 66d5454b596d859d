"""``projektor hook HARNESS`` as each agent CLI runs it: a real process with the CLI's own
payload on stdin (payloads/<harness>/, shaped as each CLI's documentation and source give
them: docs/agents.md, "Every agent CLI's edit-time hook"), in a real git worktree,
against a live server. Each refusal is checked in the form its CLI reads: exit 2 and
stderr with nothing on stdout (Claude Code, Codex, Gemini CLI), a deny object on stdout
and exit 0 (Cursor, Copilot CLI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.conftest import clean_env, unique

PAYLOADS = Path(__file__).with_name("payloads")
CLOSED_PORT_URL = "http://127.0.0.1:9"  # discard: nothing listens there
BY_EXIT_STATUS = ("claude-code", "codex", "gemini")
HARNESSES = ("codex", "gemini", "cursor", "copilot")

# Edits of free files, and what each claims (relative and absolute paths, a patch's
# every file: added, updated and moved, deleted; a shell call piping a patch).
FREE = {
    "codex": {
        "apply_patch_add_absolute": {"src/new_module.py"},
        "bash_apply_patch_heredoc": {"notes/todo.md"},
        "apply_patch_many_files": {
            "src/new_module.py",
            "README.md",
            "docs/README.md",
            "src/old.py",
        },
    },
    "gemini": {"write_file_relative": {"src/new_module.py"}},
    "cursor": {
        "write_relative_bom_no_cwd": {"src/new_module.py"},
        "delete_relative": {"src/old.py"},
        "apply_patch_many_files": {"src/new_module.py", "README.md", "docs/README.md"},
    },
    "copilot": {
        "create_relative": {"src/new_module.py"},
        "create_relative_args_object": {"src/other_module.py"},
        "apply_patch_many_files": {"src/new_module.py", "src/old.py"},
    },
}
# An edit of src/app.py, which another issue holds.
HELD = {
    "claude-code": "pre_tool_use_edit",
    "codex": "apply_patch_update_relative",
    "gemini": "replace_absolute",
    "cursor": "str_replace_absolute",
    "copilot": "edit_absolute",
}
# Tools that edit nothing, and edits outside the worktree.
SILENT = {
    "codex": ["bash", "apply_patch_outside"],
    "gemini": ["read_file", "run_shell_command"],
    "cursor": ["shell", "read"],
    "copilot": ["bash", "view"],
}


def payload(harness: str, name: str, worktree: Path) -> str:
    folder = PAYLOADS if harness == "claude-code" else PAYLOADS / harness
    text = (folder / f"{name}.json").read_text(encoding="utf-8")
    return text.replace("WORKTREE", str(worktree))


@pytest.fixture
def work(api, live, repo, tmp_path):
    """A session working on one issue in ``repo``; another issue holds src/app.py. The
    hook runs from elsewhere: the payload says where the edit is."""
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
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return {
        "env": env,
        "issue": mine,
        "theirs": theirs,
        "rival": rival,
        "repo": repo,
        "cwd": elsewhere,
    }


def hook(harness: str, stdin: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "projektor_agent", "hook", harness],
        input=stdin,
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def refusal(harness: str, done: subprocess.CompletedProcess) -> str | None:
    """The reason the CLI reads from the hook's answer, or None when it lets the edit
    go ahead; each CLI's channels as it reads them."""
    assert "Traceback" not in done.stderr
    if harness in BY_EXIT_STATUS:
        assert done.stdout == "", done.stdout  # Codex takes an unknown JSON key for a failure
        assert done.returncode in (0, 2), done.stderr
        return done.stderr if done.returncode == 2 else None
    assert done.returncode == 0, done.stderr
    if not done.stdout.strip():
        return None
    answer = json.loads(done.stdout)
    if harness == "cursor":
        assert answer["permission"] == "deny" and answer["user_message"]
        return str(answer["agent_message"])
    assert answer["permissionDecision"] == "deny"
    return str(answer["permissionDecisionReason"])


def claimed(api, issue: dict) -> set:
    rows = api.get("/file-claims/", issue=issue["id"], active="true")["results"]
    return {row["path"] for row in rows}


@pytest.mark.parametrize("harness", HARNESSES)
def test_an_edit_claims_every_file_it_changes_relative_to_the_worktree(api, work, harness):
    expected: set = set()
    for name, paths in FREE[harness].items():
        done = hook(harness, payload(harness, name, work["repo"]), work["env"], work["cwd"])
        assert refusal(harness, done) is None, (name, done.stdout, done.stderr)
        assert done.stderr == "", (name, done.stderr)
        expected |= paths
        assert claimed(api, work["issue"]) == expected, name


@pytest.mark.parametrize("harness", ("claude-code", *HARNESSES))
def test_a_held_file_is_refused_the_way_the_cli_reads_a_refusal(api, work, harness):
    done = hook(harness, payload(harness, HELD[harness], work["repo"]), work["env"], work["cwd"])
    reason = refusal(harness, done)
    assert reason is not None, (done.returncode, done.stdout, done.stderr)
    assert (
        f"src/app.py is claimed by issue {work['theirs']['id']} (agent {work['rival']}, live)"
        in reason
    )
    assert f"projektor message agent:{work['rival']}" in reason
    assert claimed(api, work["issue"]) == set()


def test_a_patch_with_one_held_file_claims_none_of_its_files(api, work):
    done = hook(
        "codex",
        payload("codex", "apply_patch_many_files_one_held", work["repo"]),
        work["env"],
        work["cwd"],
    )
    reason = refusal("codex", done)
    assert reason is not None and done.returncode == 2
    assert (
        "src/app.py is claimed by issue" in reason and "none of its 2 files was claimed" in reason
    )
    assert claimed(api, work["issue"]) == set()


@pytest.mark.parametrize("harness", HARNESSES)
def test_tools_that_edit_nothing_and_payloads_of_other_clis_pass_in_silence(api, work, harness):
    others = [h for h in ("claude-code", *HARNESSES) if h != harness]
    stdins = [payload(harness, name, work["repo"]) for name in SILENT[harness]]
    stdins += [payload(other, HELD[other], work["repo"]) for other in others]
    stdins += ["{}", "[]", '{"hook_event_name": "Stop"}']
    for stdin in stdins:
        done = hook(harness, stdin, work["env"], work["cwd"])
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), stdin
    assert claimed(api, work["issue"]) == set()


@pytest.mark.parametrize("harness", ("claude-code", *HARNESSES))
def test_a_server_that_does_not_answer_lets_the_edit_through_unless_strict(work, harness):
    away = {**work["env"], "PROJEKTOR_URL": CLOSED_PORT_URL}
    stdin = payload(harness, HELD[harness], work["repo"])
    done = hook(harness, stdin, away, work["cwd"])
    assert refusal(harness, done) is None and done.returncode == 0
    assert done.stdout == "" and "warning: cannot reach the server" in done.stderr
    strict = hook(harness, stdin, {**away, "PROJEKTOR_STRICT": "1"}, work["cwd"])
    reason = refusal(harness, strict)
    assert reason is not None and "PROJEKTOR_STRICT=1" in reason
    assert strict.returncode == (2 if harness in BY_EXIT_STATUS else 0)


@pytest.mark.parametrize("harness", HARNESSES)
def test_outside_a_runner_the_hook_does_nothing(api, work, harness):
    outside = {k: v for k, v in work["env"].items() if k != "PROJEKTOR_SESSION"}
    name = next(iter(FREE[harness]))
    done = hook(harness, payload(harness, name, work["repo"]), outside, work["cwd"])
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert claimed(api, work["issue"]) == set()


def codex_shell(worktree: Path, command: str, **tool_input: str) -> str:
    """Codex's PreToolUse for a shell tool (exec_command, shell_command, write_stdin):
    ``tool_name`` ``Bash`` whatever the tool, the command in ``tool_input.command``
    (codex-rs/core/src/tools/hook_names.rs, handlers/unified_exec.rs)."""
    return json.dumps(
        {
            "session_id": "019a5c2e-7d1f-7b30-9a41-5f2c8e0d4b17",
            "cwd": str(worktree),
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command, **tool_input},
            "tool_use_id": "call_sh3",
        }
    )


UPDATE_APP = "*** Begin Patch\n*** Update File: {path}\n@@\n-a\n+b\n*** End Patch\n"


def test_a_patch_codex_applies_from_a_shell_call_is_claimed_where_it_applies(api, work):
    repo = work["repo"]
    cd_first = f"cd src && apply_patch <<'EOF'\n{UPDATE_APP.format(path='app.py')}EOF\n"
    done = hook("codex", codex_shell(repo, cd_first), work["env"], work["cwd"])
    reason = refusal("codex", done)
    assert reason is not None and "src/app.py is claimed by issue" in reason
    typed = f"apply_patch <<'EOF'\n{UPDATE_APP.format(path='plan.md')}EOF\n"
    (repo / "notes").mkdir(exist_ok=True)  # where the shell was started
    done = hook(
        "codex", codex_shell(repo, typed, workdir=str(repo / "notes")), work["env"], work["cwd"]
    )
    assert refusal("codex", done) is None and done.stderr == "", done.stderr
    assert claimed(api, work["issue"]) == {"notes/plan.md"}
    # A patch written to a file, not applied: the shell edits none of its files.
    saved = f"cat > fix.patch <<'EOF'\n{UPDATE_APP.format(path='src/app.py')}EOF\n"
    done = hook("codex", codex_shell(repo, saved), work["env"], work["cwd"])
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert claimed(api, work["issue"]) == {"notes/plan.md"}


@pytest.mark.parametrize("harness", ("claude-code", *HARNESSES))
def test_a_wrong_hook_command_line_is_a_warning_never_a_refusal_unless_strict(api, work, harness):
    stdin = payload(harness, HELD[harness], work["repo"])

    def run(env: dict) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "projektor_agent", "hook", harness, "extra"],
            input=stdin,
            cwd=work["cwd"],
            env=clean_env(**env),
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = run(work["env"])
    assert refusal(harness, done) is None and done.returncode == 0
    assert done.stdout == "" and "warning:" in done.stderr and "takes no arguments" in done.stderr
    assert claimed(api, work["issue"]) == set()
    strict = run({**work["env"], "PROJEKTOR_STRICT": "1"})
    reason = refusal(harness, strict)
    assert reason is not None and "PROJEKTOR_STRICT=1" in reason
    assert claimed(api, work["issue"]) == set()
