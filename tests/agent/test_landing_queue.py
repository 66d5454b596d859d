"""Landing green: the queue's testers (``projektor land``, ``projektor run --integrate
--queue``) against the live server, in real repositories. The rule checked after each
test: every commit the default branch pointed to passed the check, and so does every
commit on it."""

import contextlib
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.agent.conftest import TTL, Api, git, unique, wait_until
from tests.agent.test_runner import gone

CHECK = """
import os, pathlib, runpy, subprocess, sys, time, traceback
log, gate = pathlib.Path(sys.argv[1]), (pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else None)
if gate is not None and not gate.exists():
    pathlib.Path(str(gate) + ".waiting").write_text(str(os.getpid()))
    while not gate.exists():
        time.sleep(0.02)
tree = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], capture_output=True, text=True)
sys.path.insert(0, "src")
failed = None
for path in sorted(pathlib.Path("src").glob("*.py")):
    try:
        runpy.run_path(str(path))
    except Exception:
        failed = f"checking {path}:\\n" + traceback.format_exc()
with log.open("a") as file:
    file.write(f"{tree.stdout.strip()} {'red' if failed else 'green'}\\n")
print("the check ran")
if failed:
    print(failed)
    sys.exit(1)
"""
LIB = 'def greet():\n    return "hi"\n'
RENAMED = 'def hello():\n    return "hi"\n'  # greet is gone: a caller elsewhere breaks
CALLER = 'from lib import greet\n\nassert greet() == "hi"\n'


@pytest.fixture
def checked(repo: Path, tmp_path: Path):
    """The repository with a library, and the check: a command, its log of trees, and
    a gate (the gated command waits for it before checking)."""
    (repo / "src" / "lib.py").write_text(LIB)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "Add the library")
    script = tmp_path / "check.py"
    script.write_text(CHECK)
    log, gate = tmp_path / "checks.log", tmp_path / "gate"
    command = f"PYTHONDONTWRITEBYTECODE=1 {sys.executable} {script} {log}"
    return {"command": command, "gated": f"{command} {gate}", "log": log, "gate": gate}


def checks(check) -> list[tuple[str, str]]:
    text = check["log"].read_text() if check["log"].exists() else ""
    return [tuple(line.split()) for line in text.splitlines()]


def assert_always_green(repo: Path, check, tmp_path: Path, base: str) -> None:
    """Every commit main pointed to since ``base`` (its reflog) is a tree the check
    passed; and the check, run again on every commit on main, passes."""
    green = {tree for tree, outcome in checks(check) if outcome == "green"}
    pointed = git(repo, "log", "-g", "--format=%H", "main").split()
    for commit in pointed[: pointed.index(base)]:
        assert git(repo, "rev-parse", f"{commit}^{{tree}}") in green, commit
    for commit in git(repo, "rev-list", "main").split():
        where = tmp_path / unique("tree")
        git(repo, "worktree", "add", "-q", "--detach", str(where), commit)
        again = subprocess.run(
            check["command"].replace(str(check["log"]), str(tmp_path / "again.log")),
            shell=True,
            cwd=where,
            capture_output=True,
            text=True,
        )
        assert again.returncode == 0, (commit, again.stdout)
        git(repo, "worktree", "remove", "--force", str(where))


@contextlib.contextmanager
def kept_live(api: Api, sessions: list[int]):
    """The sessions heartbeated once a second, as their runners would."""
    stop = threading.Event()

    def beat() -> None:
        beater = Api(api.url, api.key)
        while not stop.wait(1.0):
            for session in sessions:
                beater.http.post(f"/sessions/{session}/heartbeat/")
        beater.http.close()

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def queue_by_hand(api: Api, repo: Path, project: str, path: str, text: str, subject: str):
    """An issue started, its work committed on a branch of its own, queued: the entry."""
    issue = api.issue(project, subject)
    started = api.post(
        "/work/start/", {"agent": unique("coder"), "issue": issue["id"], "paths": [path]}
    )
    branch = f"work/{issue['id']}"
    git(repo, "checkout", "-q", "-b", branch, "main")
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", subject)
    git(repo, "checkout", "-q", "main")
    body = {
        "issue": issue["id"],
        "session": started["session"]["id"],
        "branch": branch,
        "commit": git(repo, "rev-parse", branch),
        "fence": started["lease"]["fence"],
    }
    return api.post("/landings/", body, expect=201)


def landing(api: Api, entry) -> dict:
    return api.get(f"/landings/{entry['id']}/")


def trailed(repo: Path, entry) -> list[str]:
    found = git(repo, "log", "--format=%H", f"--grep=^Projektor-Landing: {entry['id']}$", "main")
    return found.split()


def test_a_batch_of_entries_that_do_not_overlap_lands_after_one_check(
    api, projektor, repo, checked, tmp_path
):
    project = api.project()
    entries = [
        queue_by_hand(api, repo, project, f"src/part_{n}.py", f"PART = {n}\n", f"Part {n}")
        for n in range(3)
    ]
    base = git(repo, "rev-parse", "main")
    with kept_live(api, [entry["session"] for entry in entries]):
        done = projektor(
            "land", "--verify", checked["command"], "--project", project, cwd=repo, agent="lander"
        )
    assert done.returncode == 0, done.stderr

    assert len(checks(checked)) == 1  # one check for the three
    assert "batch of 3 under fence" in done.stderr and "green, landed" in done.stderr
    subjects = git(repo, "log", "--format=%s", f"{base}..main").splitlines()
    assert subjects == ["Part 2", "Part 1", "Part 0"]  # in order of arrival
    moves = git(repo, "log", "-g", "--format=%H", "main").split()
    assert moves[0] == git(repo, "rev-parse", "main") and moves[1] == base  # moved once
    for entry in entries:
        landed = landing(api, entry)
        assert landed["state"] == "landed"
        assert trailed(repo, entry) == [landed["landed_commit"]]
    assert git(repo, "status", "--porcelain") == ""
    assert_always_green(repo, checked, tmp_path, base)


def queue_runner(projektor, repo, tmp_path, issue, agent, path, source, check, extra=()):
    """``projektor run --integrate --queue`` whose agent writes ``source`` to ``path``
    and commits it; not waited for."""
    content = tmp_path / unique("content")
    content.write_text(source)
    script = f'mkdir -p "$(dirname {path})" && cp {content} {path} && git add -A'
    script += f' && git commit -qm "{issue["title"]}"'
    return projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--worktrees",
        str(tmp_path / "wt"),
        "--integrate",
        "--queue",
        "--verify",
        check,
        "--paths",
        path,
        "--scan",
        "0",
        "--",
        "sh",
        "-c",
        script,
        cwd=repo,
        agent=agent,
        wait=False,
    )


def entry_of(api, issue):
    found = api.get("/landings/", issue=issue["id"])
    results = found["results"] if isinstance(found, dict) else found
    return results[0] if results else None


def test_a_semantic_conflict_is_bisected_the_good_prefix_lands_and_the_culprit_goes_back(
    api, projektor, repo, checked, tmp_path
):
    project = api.project()
    first = api.issue(project, "Write notes", requires_filesystem=True)
    rename = api.issue(project, "Rename greet", requires_filesystem=True)
    call = api.issue(project, "Call greet", requires_filesystem=True)
    gated, plain = checked["gated"], checked["command"]
    base = git(repo, "rev-parse", "main")
    holder = queue_runner(projektor, repo, tmp_path, first, unique("ada"), "notes.md", "n\n", gated)
    wait_until(lambda: Path(f"{checked['gate']}.waiting").exists(), "the first batch's check")
    renamer = queue_runner(
        projektor, repo, tmp_path, rename, unique("bea"), "src/lib.py", RENAMED, plain
    )
    wait_until(lambda: entry_of(api, rename), "the rename to be queued")
    caller = queue_runner(
        projektor, repo, tmp_path, call, unique("cyd"), "src/use.py", CALLER, plain
    )
    wait_until(lambda: entry_of(api, call), "the call to be queued")
    checked["gate"].write_text("")

    assert holder.wait() == 0, holder.stderr
    assert renamer.wait() == 0, renamer.stderr
    assert caller.wait() == 1, caller.stderr

    # Three checks: the first batch; the rename and the call together (red); the rename
    # alone (green), which landed.
    assert [outcome for _, outcome in checks(checked)] == ["green", "red", "green"]
    testers = holder.stderr + renamer.stderr + caller.stderr
    assert "batch of 2 under fence" in testers and "red; bisecting" in testers
    rejected = entry_of(api, call)
    assert (rejected["state"], rejected["reason"]) == ("rejected", "check_failed")
    assert "ImportError" in rejected["detail"] and "the check ran" in rejected["detail"]
    assert f"landing {rejected['id']} (issue {call['id']}) rejected: check failed" in testers
    assert entry_of(api, rename)["state"] == entry_of(api, first)["state"] == "landed"
    assert entry_of(api, first)["id"] < entry_of(api, rename)["id"] < rejected["id"]

    subjects = git(repo, "log", "--format=%s", "-3", "main").splitlines()
    assert subjects == ["Rename greet", "Write notes", "Add the library"]  # order of arrival
    handed = api.get(f"/issues/{rename['id']}/")
    assert handed["status"] == "in_review"
    assert f"Landed on main: {git(repo, 'rev-parse', 'main')}" in handed["report"]["summary"]
    back = api.get(f"/issues/{call['id']}/")
    assert back["status"] == "todo" and back["lease"] is None
    [message] = [body for body in api.messages(call["id"]) if "gave issue" in body]
    assert "check failed" in message and "ImportError" in message
    branch = f"projektor/{call['id']}-call-greet"
    assert git(repo, "log", "-1", "--format=%s", branch) == "Call greet"  # kept
    assert api.get("/file-claims/", issue=call["id"], active="true")["results"] == []
    assert_always_green(repo, checked, tmp_path, base)


def test_a_tester_killed_mid_check_leaves_its_batch_to_another_and_each_lands_once(
    api, projektor, repo, checked, tmp_path
):
    project = api.project()
    entries = [
        queue_by_hand(api, repo, project, f"docs/{n}.md", f"{n}\n", f"Doc {n}") for n in range(2)
    ]
    base = git(repo, "rev-parse", "main")
    with kept_live(api, [entry["session"] for entry in entries]):
        killed = projektor(
            "land", "--verify", checked["gated"], "--loop", cwd=repo, agent="first", wait=False
        )
        waiting = Path(f"{checked['gate']}.waiting")
        wait_until(waiting.exists, "the check to start")
        taken = landing(api, entries[0])
        assert taken["state"] == "testing" and taken["tester"]["agent"] == "first"
        killed.process.send_signal(signal.SIGKILL)
        killed.wait()
        wait_until(lambda: gone(int(waiting.read_text())), "its check to die with it")
        checked["gate"].write_text("")
        second = projektor(
            "land", "--verify", checked["gated"], "--loop", cwd=repo, agent="second", wait=False
        )
        wait_until(
            lambda: all(landing(api, entry)["state"] == "landed" for entry in entries),
            "the batch to land by the second tester, once the first's session lapsed",
            timeout=TTL + 60,
        )
    assert not api.session(taken["tester"]["session"])["live"]
    for entry in entries:
        landed = landing(api, entry)
        assert landed["tester"]["agent"] == "second" and landed["fence"] > taken["fence"]
        assert trailed(repo, entry) == [landed["landed_commit"]]  # once
    assert git(repo, "log", "--format=%s", f"{base}..main").splitlines() == ["Doc 1", "Doc 0"]
    second.process.send_signal(signal.SIGTERM)
    assert second.wait() == 0, second.stderr
    ended = [s for s in api.get("/sessions/", agent="second", live="false")["results"]]
    assert ended and not any(s["live"] for s in ended)
    assert_always_green(repo, checked, tmp_path, base)


def test_an_entry_a_dead_tester_had_landed_is_reported_with_its_commit_not_landed_again(
    api, projektor, repo, checked, tmp_path
):
    project = api.project()
    entries = [
        queue_by_hand(api, repo, project, f"docs/{n}.md", f"{n}\n", f"Doc {n}") for n in range(2)
    ]
    dead = api.post("/sessions/", {"agent": "dead"}, expect=201)
    batch = api.post("/landings/take/", {"session": dead["id"], "project": project}, expect=200)
    assert [e["id"] for e in batch["entries"]] == [e["id"] for e in entries]
    # It landed the first entry, checked, then died before it said so.
    git(repo, "cherry-pick", entries[0]["commit"])
    message = git(repo, "log", "-1", "--format=%B")
    trailer = f"Projektor-Landing: {entries[0]['id']}"
    git(repo, "commit", "-q", "--amend", "-m", f"{message}\n\n{trailer}")
    moved = git(repo, "rev-parse", "main")
    with kept_live(api, [entry["session"] for entry in entries]):
        wait_until(lambda: not api.session(dead["id"])["live"], "the dead tester's TTL")
        done = projektor("land", "--verify", checked["command"], cwd=repo, agent="lander")
    assert done.returncode == 0, done.stderr

    assert "already on main" in done.stderr
    first, second = (landing(api, entry) for entry in entries)
    assert first["state"] == second["state"] == "landed"
    assert first["landed_commit"] == moved
    assert trailed(repo, entries[0]) == [moved] and len(trailed(repo, entries[1])) == 1
    assert git(repo, "rev-parse", "main~1") == moved
    assert_always_green(repo, checked, tmp_path, moved)


def test_sigterm_mid_check_returns_the_batch_and_ends_the_session(
    api, projektor, repo, checked, tmp_path
):
    project = api.project()
    entry = queue_by_hand(api, repo, project, "docs/a.md", "a\n", "Doc a")
    base = git(repo, "rev-parse", "main")
    with kept_live(api, [entry["session"]]):
        tester = projektor(
            "land", "--verify", checked["gated"], "--loop", cwd=repo, agent="stopped", wait=False
        )
        wait_until(Path(f"{checked['gate']}.waiting").exists, "the check to start")
        session = landing(api, entry)["tester"]["session"]
        tester.process.send_signal(signal.SIGTERM)
        assert tester.wait() == 0, tester.stderr
        back = landing(api, entry)
    assert back["state"] == "queued" and back["place"] == 1 and back["tester"] is None
    assert not api.session(session)["live"]
    assert git(repo, "rev-parse", "main") == base
    assert "returned to the queue" in tester.stderr


def test_queue_without_its_companions_is_a_usage_error_and_takes_nothing(
    api, projektor, repo, tmp_path
):
    project = api.project()
    issue = api.issue(project, "Not taken")
    integrate, verify = ["--integrate"], ["--verify", "true"]
    worktrees = ["--worktrees", str(tmp_path / "wt")]
    for words in (verify + worktrees, integrate + worktrees, integrate + verify):
        done = projektor(
            "run", "--issue", str(issue["id"]), "--queue", *words, "--", "true", cwd=repo
        )
        assert done.returncode == 2, done.stderr
        assert "--queue needs --integrate" in done.stderr
    assert api.get(f"/issues/{issue['id']}/")["lease"] is None
    outside = projektor("land", "--verify", "true", cwd=tmp_path)
    assert outside.returncode == 2 and "not in a git repository" in outside.stderr


def test_an_entry_that_does_not_apply_is_rejected_naming_the_files_and_the_next_lands(
    api, projektor, repo, checked, tmp_path
):
    project = api.project()
    clash = queue_by_hand(api, repo, project, "src/app.py", "print('ours')\n", "Ours")
    fine = queue_by_hand(api, repo, project, "docs/b.md", "b\n", "Doc b")
    # Someone who ignores the queue changes the same lines on main meanwhile.
    (repo / "src" / "app.py").write_text("print('theirs')\n")
    git(repo, "commit", "-q", "-am", "Theirs")
    base = git(repo, "rev-parse", "main")
    with kept_live(api, [clash["session"], fine["session"]]):
        done = projektor("land", "--verify", checked["command"], cwd=repo, agent="lander")
    assert done.returncode == 0, done.stderr

    rejected = landing(api, clash)
    assert (rejected["state"], rejected["reason"]) == ("rejected", "conflict")
    assert rejected["detail"] == "src/app.py"
    assert f"landing {clash['id']} (issue {clash['issue']}) rejected: conflict in src/app.py" in (
        done.stderr
    )
    assert landing(api, fine)["state"] == "landed"
    assert git(repo, "log", "--format=%s", f"{base}..main").splitlines() == ["Doc b"]
    assert (repo / "src" / "app.py").read_text() == "print('theirs')\n"
    assert len(checks(checked)) == 1
    assert_always_green(repo, checked, tmp_path, base)


def test_with_a_remote_the_batch_is_tested_on_its_default_branch_and_pushed(
    api, projektor, repo, checked, tmp_path
):
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    other = tmp_path / "other"  # someone else pushes first, from another clone
    git(tmp_path, "clone", "-q", str(origin), str(other))
    (other / "theirs.md").write_text("pushed first\n")
    git(other, "add", "theirs.md")
    git(other, "commit", "-q", "-m", "Theirs")
    git(other, "push", "-q", "origin", "main")
    ours = git(repo, "rev-parse", "main")
    project = api.project()
    entry = queue_by_hand(api, repo, project, "docs/ours.md", "ours\n", "Ours")
    with kept_live(api, [entry["session"]]):
        done = projektor("land", "--verify", checked["command"], cwd=repo, agent="pusher")
    assert done.returncode == 0, done.stderr

    landed = landing(api, entry)
    assert landed["state"] == "landed"
    assert git(origin, "rev-parse", "main") == landed["landed_commit"]
    assert git(origin, "log", "--format=%s", "-2", "main").splitlines() == ["Ours", "Theirs"]
    assert git(repo, "rev-parse", "main") == ours  # the local branch is not the one landed on
    [(tree, outcome)] = checks(checked)
    assert (tree, outcome) == (git(origin, "rev-parse", "main^{tree}"), "green")


def test_a_batch_whose_branch_moved_during_its_check_goes_back_and_lands_on_the_new_tip(
    api, projektor, repo, checked, tmp_path
):
    project = api.project()
    entry = queue_by_hand(api, repo, project, "docs/late.md", "late\n", "Late")
    once = tmp_path / "moved"
    meanwhile = (
        f"if [ ! -e {once} ]; then touch {once}; "
        f"git -C {repo} commit -q --allow-empty -m Meanwhile; fi; {checked['command']}"
    )
    with kept_live(api, [entry["session"]]):
        first = projektor("land", "--verify", meanwhile, cwd=repo, agent="racer")
        assert first.returncode == 0, first.stderr
        assert "main not moved (main moved meanwhile" in first.stderr
        back = landing(api, entry)
        assert back["state"] == "queued" and back["place"] == 1
        moved = git(repo, "rev-parse", "main")
        second = projektor("land", "--verify", meanwhile, cwd=repo, agent="racer")
        assert second.returncode == 0, second.stderr
    landed = landing(api, entry)
    assert landed["state"] == "landed" and back["fence"] is None
    assert git(repo, "log", "--format=%s", "-2", "main").splitlines() == ["Late", "Meanwhile"]
    assert git(repo, "rev-parse", "main~1") == moved
    assert_always_green(repo, checked, tmp_path, moved)


BROKEN = "from lib import missing\n"  # red on any tree: lib has no ``missing``


def test_a_culprit_in_the_middle_of_a_batch_of_four_goes_back_and_the_entries_after_it_land_later(
    api, projektor, repo, checked, tmp_path
):
    """Batch [a, culprit, c, d]: red; the prefixes [a, culprit] (red) and [a] (green) are
    checked, a lands, the culprit is rejected back to its agent, and c and d, which were
    never tested without it, go back to the queue and land on a later pass."""
    project = api.project()
    base = git(repo, "rev-parse", "main")
    first = queue_by_hand(api, repo, project, "notes/x.md", "x\n", "Notes x")
    lander = projektor(
        "land", "--verify", checked["gated"], "--project", project, "--loop",
        cwd=repo, agent="lander", wait=False,
    )  # fmt: skip
    sessions = [first["session"]]
    with kept_live(api, sessions):
        # The lander holds the project's batch ([x]) at the gate while the others queue.
        wait_until(Path(f"{checked['gate']}.waiting").exists, "the first batch's check")
        good = queue_by_hand(api, repo, project, "docs/a.md", "a\n", "Doc a")
        sessions.append(good["session"])
        culprit = api.issue(project, "Import missing", requires_filesystem=True)
        runner = queue_runner(
            projektor, repo, tmp_path, culprit, unique("cyd"), "src/broken.py", BROKEN,
            checked["command"],
        )  # fmt: skip
        wait_until(lambda: entry_of(api, culprit), "the culprit to be queued")
        after = [
            queue_by_hand(api, repo, project, f"docs/{name}.md", f"{name}\n", f"Doc {name}")
            for name in ("c", "d")
        ]
        sessions += [entry["session"] for entry in after]
        checked["gate"].write_text("")

        assert runner.wait() == 1, runner.stderr
        wait_until(
            lambda: all(landing(api, entry)["state"] == "landed" for entry in after),
            "the entries after the culprit to land on a later pass",
        )
        lander.process.send_signal(signal.SIGTERM)
        assert lander.wait() == 0, lander.stderr

    # x alone (green); a, culprit, c, d (red); a and the culprit (red); a (green): a lands;
    # then c and d (green), taken again.
    assert [outcome for _, outcome in checks(checked)] == ["green", "red", "red", "green", "green"]
    testers = lander.stderr + runner.stderr
    assert "batch of 4 under fence" in testers and "red; bisecting" in testers
    rejected = entry_of(api, culprit)
    assert (rejected["state"], rejected["reason"]) == ("rejected", "check_failed")
    assert "ImportError" in rejected["detail"] and "the check ran" in rejected["detail"]
    assert good["id"] < rejected["id"] < after[0]["id"] < after[1]["id"]
    landed = landing(api, good)
    assert landed["state"] == "landed" and landed["fence"] == rejected["fence"]
    assert f"returned to the queue under fence {landed['fence']}: landings " in testers
    for entry in after:
        later = landing(api, entry)
        assert later["fence"] > landed["fence"]  # a later batch
        assert trailed(repo, entry) == [later["landed_commit"]]
    assert trailed(repo, good) == [landed["landed_commit"]]
    subjects = git(repo, "log", "--format=%s", f"{base}..main").splitlines()
    assert subjects == ["Doc d", "Doc c", "Doc a", "Notes x"]  # the culprit never landed

    back = api.get(f"/issues/{culprit['id']}/")
    assert back["status"] == "todo" and back["lease"] is None
    [message] = [body for body in api.messages(culprit["id"]) if "gave issue" in body]
    assert "check failed" in message and "ImportError" in message
    branch = f"projektor/{culprit['id']}-import-missing"
    assert git(repo, "log", "-1", "--format=%s", branch) == "Import missing"  # kept
    assert_always_green(repo, checked, tmp_path, base)
