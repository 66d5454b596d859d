"""``projektor run`` against a live server, in a scratch repository, with a scripted
agent: the session kept live past the TTL, the hand-in, the failure path, and what a
killed runner leaves behind."""

import contextlib
import os
import signal
from pathlib import Path

from tests.agent.conftest import (
    TTL,
    agent_command,
    git,
    read_json,
    released,
    unique,
    wait_until,
)


def started(control: Path, runner=None) -> dict:
    """The scripted agent's start record, once it has started (fails at once, with the
    runner's stderr, if the runner exits first)."""

    def check():
        if (control / "started.json").exists():
            return read_json(control / "started.json")
        if runner is not None and runner.process.poll() is not None:
            raise AssertionError(f"the runner exited {runner.process.returncode}: {runner.stderr}")
        return None

    return wait_until(check, "the agent to start")


def control_dir(tmp_path: Path) -> Path:
    control = tmp_path / unique("control")
    control.mkdir()
    return control


def test_an_agent_slower_than_the_ttl_stays_live_and_its_work_is_handed_in(
    api, projektor, repo, tmp_path
):
    project, agent, control = api.project(), unique("atlas"), control_dir(tmp_path)
    issue = api.issue(project, "Add the login page")
    runner = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        *agent_command(control, "--wait", "--edit", "src/login.py", "--commit", "Add login"),
        "issue={issue}",
        "title={title}",
        cwd=repo,
        agent=agent,
        wait=False,
    )
    child = started(control, runner)
    env = child["env"]
    assert child["argv"][-2:] == [f"issue={issue['id']}", "title=Add the login page"]
    assert env["PROJEKTOR_ISSUE"] == str(issue["id"])
    assert {"PROJEKTOR_URL", "PROJEKTOR_API_KEY", "PROJEKTOR_SESSION", "PROJEKTOR_FENCE"} <= set(
        env
    )
    assert env["PROJEKTOR_RUN"].isdigit()
    assert "# Issue" in child["issue_md"] and "Add the login page" in child["issue_md"]
    session = int(env["PROJEKTOR_SESSION"])

    # The agent works for two TTLs: its session stays live all along.
    first = api.session(session)
    assert first["ttl_seconds"] == TTL
    begun = os.times().elapsed

    def live_for_two_ttls() -> bool:
        current = api.session(session)
        assert current["live"], current
        return os.times().elapsed - begun > 2 * TTL

    wait_until(live_for_two_ttls, "two TTLs to pass", timeout=2 * TTL + 30)
    assert api.session(session)["last_heartbeat_at"] > first["last_heartbeat_at"]
    other = api.post("/sessions/", {"agent": unique("rival")}, expect=201)
    refused = api.post(f"/issues/{issue['id']}/claim/", {"session": other["id"]}, expect=409)
    assert refused["code"] == "lease_held"

    released(control)
    assert runner.wait() == 0, runner.stderr
    handed = api.get(f"/issues/{issue['id']}/")
    assert handed["status"] == "in_review"
    assert "- Add login" in handed["report"]["summary"]
    assert handed["report"]["verification"]
    assert api.session(session)["status"] == "ended"
    assert git(repo, "log", "-1", "--format=%s") == "Add login"
    assert "Traceback" not in runner.stderr and "no longer" not in runner.stderr


def test_a_failing_agent_gives_the_issue_back_with_the_tail_of_its_stderr(
    api, projektor, repo, tmp_path
):
    project, agent, control = api.project(), unique("boreas"), control_dir(tmp_path)
    issue = api.issue(project)
    done = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        *agent_command(
            control, "--stderr", "ImportError: no module named frobnicate", "--exit", "3"
        ),
        cwd=repo,
        agent=agent,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    back = api.get(f"/issues/{issue['id']}/")
    assert back["status"] == "todo" and back["lease"] is None
    [lease] = api.leases(issue["id"])
    assert lease["release_reason"] == "released"
    [message] = [body for body in api.messages(issue["id"]) if "gave issue" in body]
    assert "exited with status 3" in message
    assert "ImportError: no module named frobnicate" in message
    session = int(read_json(control / "started.json")["env"]["PROJEKTOR_SESSION"])
    assert api.session(session)["status"] == "ended"
    [run] = api.get("/runs/", issue=issue["id"])["results"]
    assert run["status"] == "failed"


def test_a_runner_killed_with_sigkill_leaves_its_work_to_be_reclaimed_after_the_ttl(
    api, projektor, repo, tmp_path
):
    project, agent, control = api.project(), unique("castor"), control_dir(tmp_path)
    issue = api.issue(project)
    runner = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        *agent_command(control, "--wait"),
        cwd=repo,
        agent=agent,
        wait=False,
    )
    child = started(control, runner)
    session = int(child["env"]["PROJEKTOR_SESSION"])
    try:
        runner.process.send_signal(signal.SIGKILL)
        runner.process.wait()
        rival = unique("pollux")
        early = projektor("start", str(issue["id"]), cwd=repo, agent=rival)
        assert early.returncode == 1
        assert f"agent {agent}" in early.stderr and f"issue {issue['id']}" in early.stderr
        wait_until(lambda: not api.session(session)["live"], "the TTL to pass")
        late = projektor("start", str(issue["id"]), "--json", cwd=repo, agent=rival)
        assert late.returncode == 0, late.stderr
        [old] = [lease for lease in api.leases(issue["id"]) if lease["session"] == session]
        assert old["release_reason"] == "expired"
    finally:
        with contextlib.suppress(ProcessLookupError):  # stopped with its runner already
            os.kill(child["pid"], signal.SIGKILL)


def gone(pid: int) -> bool:
    """The process has exited: no such process, or a zombie nobody reaped yet."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "Z"
    return False


def test_an_agent_and_its_own_children_die_with_a_sigkilled_runner_and_commit_nothing(
    api, projektor, repo, tmp_path
):
    """Invariant 19 (A runner's child never outlives its runner's right to work): an
    orphan would commit later, on work whose lease went to someone else."""
    project, agent, control = api.project(), unique("orpheus"), control_dir(tmp_path)
    issue = api.issue(project)
    runner = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        *agent_command(control, "--helper", "--wait", "--edit", "late.txt", "--commit", "Late"),
        cwd=repo,
        agent=agent,
        wait=False,
    )
    child = started(control, runner)
    try:
        runner.process.send_signal(signal.SIGKILL)
        runner.process.wait()
        wait_until(lambda: gone(child["pid"]), "the agent to die with its runner")
        wait_until(lambda: gone(child["helper"]), "the agent's own child to die with it")
        released(control)  # an agent still alive would commit now
        assert git(repo, "log", "--format=%s") == "Initial commit"
        assert not (repo / "late.txt").exists()
    finally:
        for pid in (child["pid"], child["helper"]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_killed_runners_issue_is_taken_over_by_the_next_runner_after_the_ttl(
    api, projektor, repo, tmp_path
):
    """No sweep job, no stuck work: the issue a SIGKILLed runner left in progress is not
    in the ready queue (it is not todo), and the next runner takes it over once the dead
    session's TTL has passed, finishing it; an issue a person moved to in progress, with
    no lease, is left to them."""
    project, control = api.project(), control_dir(tmp_path)
    issue, persons = api.issue(project, "Interrupted"), api.issue(project, "By hand")
    api.post(f"/issues/{persons['id']}/transition/", {"to": "in_progress"})
    killed = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        *agent_command(control, "--wait"),
        cwd=repo,
        agent=unique("icarus"),
        wait=False,
    )
    child = started(control, killed)
    dead = int(child["env"]["PROJEKTOR_SESSION"])
    killed.process.send_signal(signal.SIGKILL)
    killed.process.wait()
    wait_until(lambda: gone(child["pid"]), "the agent to die with its runner")
    wait_until(lambda: not api.session(dead)["live"], "the TTL to pass", timeout=TTL + 30)
    assert api.get(f"/issues/{issue['id']}/")["status"] == "in_progress"

    heir = unique("daedalus")
    second = control_dir(tmp_path)
    done = projektor(
        "run",
        "--next",
        "--project",
        project,
        *agent_command(second, "--edit", "src/resumed.py", "--commit", "Resumed"),
        cwd=repo,
        agent=heir,
    )
    assert done.returncode == 0, done.stderr
    assert f"issue {issue['id']}: taken over from agent" in done.stderr
    finished = api.get(f"/issues/{issue['id']}/")
    assert finished["status"] == "in_review" and finished["assignee"] == heir
    reasons = [lease["release_reason"] for lease in api.leases(issue["id"])]
    assert sorted(reasons, key=str) == sorted(["expired", "released"], key=str), reasons
    assert api.get(f"/issues/{persons['id']}/")["status"] == "in_progress"
