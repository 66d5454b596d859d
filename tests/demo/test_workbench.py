"""The workbench without a server: the repository and plan drawn from a seed, and the
scripted agent as a real process in real git worktrees (its hooks: real commands in the
checkout's Claude Code settings, as ``projektor run --hooks claude-code`` writes them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from demo.workbench import check_script, checks, layout, repository
from demo.workbench.layout import CHANGELOG, ROUTER
from demo.workbench.plan import SEMANTIC_EVERY, Plan, PlanIssue

AGENT = Path(repository.__file__).with_name("agent.py")
ROOT = AGENT.parents[2]


def git(cwd: Path, *args: str) -> str:
    return repository.git(cwd, *args).strip()


def agent(
    worktree: Path,
    plan: Path,
    issue: int,
    *extra: str,
    module: bool = False,
    path_first: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROJEKTOR_", "GIT_"))}
    env.update(PROJEKTOR_ISSUE=str(issue), PYTHONPATH=str(ROOT))
    if path_first is not None:
        env["PATH"] = os.pathsep.join([str(path_first), env.get("PATH", "")])
    program = ["-m", "demo.workbench.agent"] if module else [str(AGENT)]
    return subprocess.run(
        [sys.executable, *program, "--plan", str(plan), *extra],
        cwd=worktree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def quick_plan(plan: Plan) -> None:
    """No waiting and no crash, unless a test asks for them."""
    for issue in plan.issues:
        issue.work_seconds = 0.0
        issue.crash = None


@pytest.fixture
def bench(tmp_path: Path) -> tuple[Path, Plan, Path]:
    repo = tmp_path / "repo"
    plan = repository.create(repo, seed=11, issues=6)
    quick_plan(plan)
    return repo, plan, tmp_path / "plan.json"


def worktree(repo: Path, name: str) -> Path:
    where = repo.parent / name
    git(repo, "worktree", "add", "-q", "-b", f"projektor/{name}", str(where), "main")
    return where


def test_the_same_seed_makes_the_same_repository_and_plan(tmp_path: Path) -> None:
    first = repository.create(tmp_path / "a", seed=3, issues=10)
    second = repository.create(tmp_path / "b", seed=3, issues=10)
    other = repository.create(tmp_path / "c", seed=4, issues=10)
    assert git(tmp_path / "a", "rev-parse", "main") == git(tmp_path / "b", "rev-parse", "main")
    assert git(tmp_path / "a", "rev-parse", "main") != git(tmp_path / "c", "rev-parse", "main")
    assert first == second and first != other
    files = git(tmp_path / "a", "ls-files").splitlines()
    assert len(files) >= 200 and {CHANGELOG, ROUTER, layout.SETTINGS} <= set(files)
    assert max(name.count("/") for name in files) >= 4  # nested directories


@pytest.mark.parametrize("count", [2, 3, 5, 40])
def test_every_plan_has_a_crash_a_dependency_and_a_shared_hot_file(
    tmp_path: Path, count: int
) -> None:
    plan = repository.create(
        tmp_path / "repo", seed=1, issues=count, crash_rate=0, dependency_rate=0
    )
    keys = {issue.key for issue in plan.issues}
    assert any(issue.crash for issue in plan.issues)
    assert any(issue.blocked_by for issue in plan.issues)
    for issue in plan.issues:
        assert set(issue.blocked_by) <= {key for key in keys if key < issue.key}
        assert len(issue.alternatives) == len(issue.extra)
        assert not set(issue.extra) & set(issue.paths)
    assert max(len(keys) for keys in plan.hot_sharing().values()) >= min(3, count)


def test_a_plan_saved_loads_as_it_was(bench: tuple[Path, Plan, Path]) -> None:
    _, plan, path = bench
    plan.assign({issue.key: 100 + issue.key for issue in plan.issues})
    plan.save(path)
    assert Plan.load(path) == plan


def test_the_agent_edits_its_files_and_commits_once(bench: tuple[Path, Plan, Path]) -> None:
    repo, plan, path = bench
    plan.assign({issue.key: 100 + issue.key for issue in plan.issues})
    plan.save(path)
    issue = plan.issues[0]
    checkout = worktree(repo, "one")
    done = agent(checkout, path, issue.id or 0, module=True)
    assert done.returncode == 0, done.stderr
    changed = git(checkout, "diff", "--name-only", "main", "HEAD").splitlines()
    assert set(changed) == set(issue.paths) | set(issue.extra)
    assert git(checkout, "log", "--format=%s%n%b", "main..HEAD").splitlines()[0] == issue.title
    assert f"Workbench-Issue: {issue.key}" in git(checkout, "log", "-1", "--format=%b")


FAKE_PROJEKTOR = """#!{python}
import json, os, subprocess, sys
with open({log!r}, "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if {status}:
    sys.exit({status})  # the resource stayed busy
command = sys.argv[sys.argv.index("--") + 1 :]
sys.exit(subprocess.run(command, env={{**os.environ, "PROJEKTOR_SLOT": "1"}}).returncode)
"""


@pytest.mark.parametrize("status, said", [(0, "the tests passed"), (1, "committing untested")])
def test_its_tests_run_while_it_holds_a_test_database(
    bench: tuple[Path, Plan, Path], tmp_path: Path, status: int, said: str
) -> None:
    """--hold-tests: the tests are ``projektor hold NAME --wait 30 -- …``, given the slot;
    a resource that stayed busy leaves the work committed, untested."""
    repo, plan, path = bench
    issue = plan.issues[0]
    issue.work_seconds = 0.3
    plan.save(path)
    bin_dir, log = tmp_path / "bin", tmp_path / "projektor.log"
    bin_dir.mkdir()
    fake = bin_dir / "projektor"
    fake.write_text(FAKE_PROJEKTOR.format(python=sys.executable, log=str(log), status=status))
    fake.chmod(0o755)
    checkout = worktree(repo, "one")
    done = agent(checkout, path, issue.key, "--hold-tests", "test-db", path_first=bin_dir)
    assert done.returncode == 0, done.stderr
    [call] = [json.loads(line) for line in log.read_text().splitlines()]
    assert call[:5] == ["hold", "test-db", "--wait", "30", "--"]
    assert call[5] == sys.executable and call[-1] == issue.title
    assert said in done.stderr
    assert ("against test_1" in done.stderr) == (status == 0)
    assert git(checkout, "rev-list", "--count", "main..HEAD") == "1"
    # Without it, no tests.
    again = worktree(repo, "two")
    assert agent(again, path, issue.key, path_first=bin_dir).returncode == 0
    assert len(log.read_text().splitlines()) == 1


def test_an_unknown_issue_is_a_usage_error(bench: tuple[Path, Plan, Path]) -> None:
    repo, plan, path = bench
    plan.save(path)
    done = agent(repo, path, 999)
    assert done.returncode == 2 and "not in the plan" in done.stderr


def test_two_issues_on_the_same_hot_file_conflict_under_a_rebase(
    bench: tuple[Path, Plan, Path],
) -> None:
    repo, plan, path = bench
    first, second = plan.issues[0], plan.issues[1]
    first.paths, first.extra, first.alternatives = [CHANGELOG], [], []
    second.paths, second.extra, second.alternatives = [CHANGELOG], [], []
    plan.save(path)  # no ids: the agent goes by key
    one, two = worktree(repo, "one"), worktree(repo, "two")
    assert agent(one, path, first.key).returncode == 0
    assert agent(two, path, second.key).returncode == 0
    rebase = subprocess.run(
        ["git", "rebase", "projektor/one"], cwd=two, capture_output=True, text=True
    )
    assert rebase.returncode != 0 and CHANGELOG in rebase.stdout + rebase.stderr


@pytest.mark.parametrize("how, status", [("exit", 1), ("sigkill", -signal.SIGKILL)])
def test_a_planned_crash_happens_on_the_first_attempt_only(
    bench: tuple[Path, Plan, Path], how: str, status: int
) -> None:
    repo, plan, path = bench
    issue = plan.issues[0]
    issue.crash, issue.crash_after = how, 0
    plan.save(path)
    checkout = worktree(repo, "one")
    crashed = agent(checkout, path, issue.key)
    assert crashed.returncode == status and "crashing as planned" in crashed.stderr
    assert git(checkout, "rev-parse", "HEAD") == git(repo, "rev-parse", "main")
    again = agent(checkout, path, issue.key)
    assert again.returncode == 0, again.stderr
    assert git(checkout, "rev-list", "--count", "main..HEAD") == "1"


def test_an_earlier_attempt_that_did_not_land_is_redone_from_the_newest_base(
    bench: tuple[Path, Plan, Path],
) -> None:
    repo, plan, path = bench
    first, second = plan.issues[0], plan.issues[1]
    first.paths, first.extra, first.alternatives = [CHANGELOG], [], []
    second.paths, second.extra, second.alternatives = [CHANGELOG], [], []
    plan.save(path)
    one, two = worktree(repo, "one"), worktree(repo, "two")
    assert agent(two, path, second.key).returncode == 0  # made on the old main
    assert agent(one, path, first.key).returncode == 0
    git(repo, "merge", "-q", "--ff-only", "projektor/one")  # the first lands
    again = agent(two, path, second.key)
    assert again.returncode == 0 and "redoing" in again.stderr
    assert git(two, "rev-parse", "HEAD~1") == git(repo, "rev-parse", "main")
    assert git(two, "rev-list", "--count", "main..HEAD") == "1"


HOOK = """
import json, sys
payload = json.load(sys.stdin)
with open({log!r}, "a") as log:
    log.write(json.dumps(payload) + "\\n")
if payload["hook_event_name"] == "PreToolUse" and payload["tool_input"]["file_path"].endswith(
    tuple({refused!r})
):
    print("held by issue 9 (agent other, live); choose another file", file=sys.stderr)
    sys.exit(2)
"""


def settings_with_hook(checkout: Path, log: Path, refused: list[str]) -> None:
    script = checkout.parent / "hook.py"
    script.write_text(HOOK.format(log=str(log), refused=refused))
    command = f"{sys.executable} {script}"
    settings = {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "Edit|Write|MultiEdit|NotebookEdit",
                    "hooks": [{"type": "command", "command": command}],
                }
            ],
            "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": command}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "exit 2"}]}],
        }
    }
    (checkout / ".claude").mkdir()
    (checkout / ".claude" / "settings.local.json").write_text(json.dumps(settings))
    exclude = Path(git(checkout, "rev-parse", "--git-path", "info/exclude"))
    exclude = exclude if exclude.is_absolute() else checkout / exclude
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text("/.claude/\n")  # as the runner does: not part of the work


def test_coordinated_it_announces_each_edit_and_obeys_a_refusal(
    bench: tuple[Path, Plan, Path],
) -> None:
    repo, plan, path = bench
    issue = plan.issues[0]
    refused_extra = ROUTER
    issue.extra, issue.alternatives = [refused_extra], [issue.paths[0].replace(".", "_alt.", 1)]
    alternative = issue.alternatives[0]
    (repo / alternative).write_text("an alternative\n")
    git(repo, "add", alternative)
    git(repo, "commit", "-q", "-m", "An alternative file")
    plan.save(path)
    checkout = worktree(repo, "one")
    log = repo.parent / "hook.log"
    settings_with_hook(checkout, log, [refused_extra])
    done = agent(checkout, path, issue.key, "--coordinated")
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    pre = [c["tool_input"]["file_path"] for c in calls if c["hook_event_name"] == "PreToolUse"]
    post = [c["tool_input"]["file_path"] for c in calls if c["hook_event_name"] == "PostToolUse"]
    absolute = [str((checkout / p).resolve()) for p in [*issue.paths, refused_extra, alternative]]
    assert (
        pre == absolute
    )  # each declared file, the refused one (once: undeclared), its alternative
    assert post == absolute[: len(issue.paths)] + absolute[-1:]  # only what was edited
    assert all(c["tool_name"] == "Edit" and c["cwd"] == str(checkout) for c in calls)
    changed = git(checkout, "diff", "--name-only", "main", "HEAD").splitlines()
    assert set(changed) == {*issue.paths, alternative}
    assert "editing" in done.stderr and refused_extra in done.stderr


def test_coordinated_a_refused_declared_file_is_retried_then_left(
    bench: tuple[Path, Plan, Path],
) -> None:
    repo, plan, path = bench
    issue = plan.issues[0]
    issue.paths, issue.extra, issue.alternatives = [CHANGELOG, issue.paths[0]], [], []
    plan.save(path)
    checkout = worktree(repo, "one")
    log = repo.parent / "hook.log"
    settings_with_hook(checkout, log, [CHANGELOG])
    done = agent(checkout, path, issue.key, "--coordinated")
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    tried = [c for c in calls if c["tool_input"]["file_path"].endswith(CHANGELOG)]
    assert len(tried) == 4 and {c["hook_event_name"] for c in tried} == {"PreToolUse"}
    changed = git(checkout, "diff", "--name-only", "main", "HEAD").splitlines()
    assert changed == [issue.paths[1]]


SPEAKER = """
import json, sys
sys.path.insert(0, {root!r})
from projektor_agent import harnesses
harness = harnesses.named({harness!r})
raw = sys.stdin.buffer.read().decode("utf-8")
with open({log!r}, "a") as log:
    bom = raw.startswith("\\ufeff")
    log.write(json.dumps({{"bom": bom, "payload": harnesses.loads(raw)}}) + "\\n")
edit = harness.read(harnesses.loads(raw))
if edit and any(path.endswith({refused!r}) for path in edit.paths):
    sys.exit(harness.block("held by issue 9 (agent other, live); choose another file"))
"""


@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini", "cursor", "copilot"])
def test_coordinated_it_speaks_each_clis_hooks_and_obeys_their_refusals(
    bench: tuple[Path, Plan, Path], harness: str
) -> None:
    """The hooks named in each CLI's own file (as ``projektor run --hooks NAME`` writes
    it) get that CLI's payload, read here by projektor's own adapter; a refusal said
    that CLI's way is obeyed: the declared file tried again, then left."""
    from projektor_agent import hook_install

    repo, plan, path = bench
    issue = plan.issues[0]
    issue.paths, issue.extra, issue.alternatives = [CHANGELOG, issue.paths[0]], [], []
    plan.save(path)
    checkout = worktree(repo, "one")
    log = repo.parent / "hook.log"
    script = repo.parent / "speaker.py"
    script.write_text(
        SPEAKER.format(root=str(ROOT), harness=harness, log=str(log), refused=CHANGELOG)
    )
    installed = hook_install.install(harness, checkout)
    written = installed.path.read_text().replace(
        hook_install.command_line(harness).replace("\\", "\\\\"), f"{sys.executable} {script}"
    )
    installed.path.write_text(written)
    assert str(script) in written
    done = agent(checkout, path, issue.key, "--coordinated", "--harness", harness)
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    edits = [harnesses_read(harness, call["payload"]) for call in calls]
    assert None not in edits  # every payload one the CLI's adapter reads as an edit
    tried = [paths for paths in edits if paths and any(p.endswith(CHANGELOG) for p in paths)]
    assert len(tried) == 4  # once, then three times again
    assert all(call["bom"] == (harness == "cursor") for call in calls)
    changed = git(checkout, "diff", "--name-only", "main", "HEAD").splitlines()
    assert changed == [issue.paths[1]]
    assert "refused" in done.stderr


def harnesses_read(harness: str, payload: dict) -> list[str] | None:
    from projektor_agent import harnesses

    edit = harnesses.named(harness).read(payload)
    if edit is None or (edit.progress and harness == "claude-code"):
        return [] if edit is not None else None
    return edit.paths


# --- the check and the semantic pairs --------------------------------------------------------


def test_the_check_passes_on_the_base_says_what_fails_and_writes_nothing(
    bench: tuple[Path, Plan, Path],
) -> None:
    """``check.py`` imports every module of ``src/`` and runs its ``check_`` functions;
    a failure is a line of its own and exit 1; WORKBENCH_CHECK_SECONDS sets its sleep."""
    repo, _, _ = bench
    assert check_script.CHECK_SECONDS_VARIABLE == "WORKBENCH_CHECK_SECONDS"
    assert "SECONDS = 10.0" in (repo / check_script.CHECK).read_text()  # the default
    passed, failures, said = checks.run_check(repo, seconds=0)
    assert passed and failures == [], said
    assert "0 failed (slept 0 s)" in said
    services = sorted((repo / "src" / "app").glob("*/services/*.py"))
    assert len(services) >= 10 and said.count("passed") == 1
    broken = services[0]
    broken.write_text(broken.read_text().replace("return amount *", "return amount +"))
    passed, failures, said = checks.run_check(repo, seconds=0)
    module = layout.module_name(str(broken.relative_to(repo)))
    assert not passed and len(failures) == 1 and failures[0].startswith(f"FAIL {module}.check_")
    assert "AssertionError" in failures[0] and "1 failed" in said
    assert git(repo, "status", "--short") == f"M {broken.relative_to(repo)}"  # no bytecode


@pytest.mark.parametrize("count", [2, 6, 12, 24, 64])
def test_every_plan_of_two_issues_or_more_has_semantic_pairs(tmp_path: Path, count: int) -> None:
    plan = repository.create(tmp_path / "repo", seed=2, issues=count)
    pairs = plan.pairs()
    assert len(pairs) == -(-(count - 1) // SEMANTIC_EVERY)  # at keys 1, 13, 25 …
    assert [issue.key for issue in pairs[1]] == [1, 2]  # taken at the start, together
    renamed = [rename.semantic["path"] for rename, _ in pairs.values()]  # type: ignore[index]
    assert len(set(renamed)) == len(renamed)  # each pair a function of its own
    for rename, call in pairs.values():
        assert rename.semantic and call.semantic
        assert rename.semantic["role"] == "rename" and call.semantic["role"] == "call"
        assert call.semantic["target"] == rename.semantic["path"]
        assert rename.paths == [rename.semantic["path"]] and call.paths == [call.semantic["path"]]
        assert rename.paths != call.paths
        if count > 2:  # with two issues, the pair takes the crash and the dependency too
            assert rename.crash is None and call.crash is None
            assert rename.key not in call.blocked_by and call.key not in rename.blocked_by
            assert not rename.extra and not call.extra
        assert not {*rename.paths, *call.paths} & set(layout.HOT)


def pair_issues(plan: Plan) -> tuple[PlanIssue, PlanIssue]:
    rename, call = plan.pairs()[1]
    return rename, call


def test_a_semantic_pair_passes_alone_and_fails_together(
    bench: tuple[Path, Plan, Path],
) -> None:
    """The rename and the call, each made on the same base: each branch passes the check;
    the two landed one after the other (no textual conflict) fail it."""
    repo, plan, path = bench
    plan.save(path)
    rename, call = pair_issues(plan)
    one, two = worktree(repo, "one"), worktree(repo, "two")
    assert agent(one, path, rename.key).returncode == 0
    assert agent(two, path, call.key).returncode == 0
    assert checks.run_check(one, seconds=0)[0]
    assert checks.run_check(two, seconds=0)[0]
    git(repo, "merge", "-q", "--ff-only", "projektor/one")
    git(two, "rebase", "-q", "main")  # clean: different files
    passed, failures, _ = checks.run_check(two, seconds=0)
    assert not passed
    [failure] = failures
    old = rename.semantic["old"]  # type: ignore[index]
    assert call.semantic["feature"] in failure and old in failure  # type: ignore[index]
    assert "ImportError" in failure


@pytest.mark.parametrize("first", ["rename", "call"])
def test_a_semantic_pair_member_redone_after_the_other_landed_passes(
    bench: tuple[Path, Plan, Path], first: str
) -> None:
    """The call made after the rename landed uses the new name; the rename made after
    the call landed renames the call too."""
    repo, plan, path = bench
    plan.save(path)
    rename, call = pair_issues(plan)
    before, after = (rename, call) if first == "rename" else (call, rename)
    one = worktree(repo, "one")
    assert agent(one, path, before.key).returncode == 0
    git(repo, "merge", "-q", "--ff-only", "projektor/one")
    two = worktree(repo, "two")
    done = agent(two, path, after.key)
    assert done.returncode == 0, done.stderr
    passed, _, said = checks.run_check(two, seconds=0)
    assert passed, said
    new = rename.semantic["new"]  # type: ignore[index]
    caller = (two / call.semantic["path"]).read_text()  # type: ignore[index]
    assert f"import {new}" in caller and rename.semantic["old"] not in caller  # type: ignore[index]
    changed = git(two, "diff", "--name-only", "main", "HEAD").splitlines()
    assert set(changed) == (
        {call.semantic["path"]}  # type: ignore[index]
        if first == "rename"
        else {rename.semantic["path"], call.semantic["path"]}  # type: ignore[index]
    )


def test_red_commits_are_the_commits_on_main_whose_tree_fails_the_check(
    bench: tuple[Path, Plan, Path],
) -> None:
    """Every commit after the base is checked out and checked: the semantic pair's
    second landing is red, and so is what follows it until a fix."""
    repo, plan, path = bench
    plan.save(path)
    rename, call = pair_issues(plan)
    base = repository.base_commit(repo)
    assert checks.red_commits(repo, base) == []  # nothing after the base
    one, two = worktree(repo, "one"), worktree(repo, "two")
    assert agent(one, path, rename.key).returncode == 0
    assert agent(two, path, call.key).returncode == 0
    git(repo, "merge", "-q", "--ff-only", "projektor/one")
    git(two, "rebase", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "projektor/two")
    red_tip = git(repo, "rev-parse", "main")
    (repo / "notes.txt").write_text("a commit that changes nothing checked\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "-m", "Notes")
    red = checks.red_commits(repo, base)
    assert [commit["commit"] for commit in red] == [red_tip, git(repo, "rev-parse", "main")]
    assert red[0]["subject"] == call.title and red[0]["failures"][0].startswith("FAIL ")
    assert red[0]["new"] == red[0]["failures"] and red[1]["new"] == []  # it broke main
    assert git(repo, "worktree", "list").count("\n") == 2  # the audit's own is gone
    assert checks.red_commits(repo, base, branch="projektor/one") == []


def test_with_check_it_fails_when_its_work_breaks_the_check_not_its_base(
    bench: tuple[Path, Plan, Path],
) -> None:
    """--check, as a pull request's CI: the agent's own breakage is exit 1 saying what
    failed; a base that fails already does not fail it."""
    repo, plan, path = bench
    rename, call = pair_issues(plan)
    call.semantic["module"] = "app.nowhere"  # type: ignore[index]
    plan.save(path)
    broken = agent(worktree(repo, "one"), path, call.key, "--check")
    assert broken.returncode == 1 and "the check failed" in broken.stderr
    assert "app.nowhere" in broken.stderr
    # On a red base (the call above landed), a sound change passes.
    git(repo, "merge", "-q", "--ff-only", "projektor/one")
    assert not checks.run_check(repo, seconds=0)[0]
    other = next(issue for issue in plan.issues if not issue.semantic and not issue.crash)
    done = agent(worktree(repo, "two"), path, other.key, "--check")
    assert done.returncode == 0, done.stderr
    assert "as its base did" in done.stderr
    ready = path.with_name(path.name + ".ready")
    assert [note.name.split(".")[0] for note in ready.iterdir()] == [str(other.key)]


def test_coordinated_a_rename_whose_caller_stays_refused_gives_the_issue_back(
    bench: tuple[Path, Plan, Path],
) -> None:
    """All or nothing: a caller the hooks keep refusing is exit 1, nothing committed."""
    repo, plan, path = bench
    plan.save(path)
    rename, call = pair_issues(plan)
    one = worktree(repo, "one")
    assert agent(one, path, call.key).returncode == 0  # the call lands first
    git(repo, "merge", "-q", "--ff-only", "projektor/one")
    two = worktree(repo, "two")
    log = repo.parent / "hook.log"
    settings_with_hook(two, log, [call.semantic["path"]])  # type: ignore[index]
    done = agent(two, path, rename.key, "--coordinated")
    assert done.returncode == 1 and "stayed someone else's" in done.stderr
    assert git(two, "rev-list", "--count", "main..HEAD") == "0"
