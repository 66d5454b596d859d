"""The runner stops its agent the moment the work is no longer its own: the issue
closed, its claims taken by force, its lease reclaimed while the server was away;
and a child that ignores SIGTERM is killed after the grace period."""

import os
import signal

from tests.agent.conftest import TTL, agent_command, read_json, unique, wait_until
from tests.agent.test_runner import control_dir, started


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie until its parent reaps it: dead as far as work goes.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"


def test_closing_the_issue_stops_the_agent_and_nothing_is_handed_in(api, projektor, repo, tmp_path):
    project, control = api.project(), control_dir(tmp_path)
    issue = api.issue(project)
    runner = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        *agent_command(control, "--wait"),
        cwd=repo,
        agent=unique("janus"),
        wait=False,
    )
    started(control, runner)
    api.post(f"/issues/{issue['id']}/transition/", {"to": "cancelled"}, expect=200)
    assert runner.wait() == 1
    assert read_json(control / "started.json")  # it ran
    assert (control / "terminated").read_text() == str(int(signal.SIGTERM))
    assert "issue_closed" in runner.stderr
    closed = api.get(f"/issues/{issue['id']}/")
    assert closed["status"] == "cancelled" and closed["report"] is None


def test_claims_taken_by_force_stop_an_agent_that_ignores_sigterm_with_sigkill(
    api, projektor, repo, tmp_path
):
    project, control = api.project(), control_dir(tmp_path)
    issue, other = api.issue(project), api.issue(project, "Urgent fix")
    runner = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--paths",
        "src/app.py",
        "--grace",
        "1",
        *agent_command(control, "--wait", "--ignore-term"),
        cwd=repo,
        agent=unique("kronos"),
        wait=False,
    )
    child = started(control, runner)
    rival = api.post("/sessions/", {"agent": unique("leto")}, expect=201)
    body = {"issue": other["id"], "paths": ["src/app.py"], "session": rival["id"], "force": True}
    api.post("/file-claims/", body, expect=201)
    assert runner.wait() == 1
    assert "overridden" in runner.stderr
    assert gone(child["pid"])
    assert not (control / "terminated").exists()  # it ignored SIGTERM: SIGKILL ended it
    assert api.get(f"/issues/{issue['id']}/")["status"] == "in_progress"


def test_a_server_gone_past_the_ttl_then_the_work_reclaimed_stops_the_agent(
    api, projektor, proxy, repo, tmp_path
):
    project, control = api.project(), control_dir(tmp_path)
    issue = api.issue(project)
    runner = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        *agent_command(control, "--wait"),
        cwd=repo,
        agent=unique("maia"),
        wait=False,
        PROJEKTOR_URL=proxy.url,
    )
    child = started(control, runner)
    session = int(child["env"]["PROJEKTOR_SESSION"])
    proxy.down()
    wait_until(lambda: "cannot heartbeat" in runner.stderr, "the runner to notice")
    wait_until(lambda: not api.session(session)["live"], "the TTL to pass", timeout=TTL + 30)
    wait_until(lambda: "TTL" in runner.stderr and "reclaim" in runner.stderr, "the warning")
    assert not gone(child["pid"])  # the agent kept working meanwhile
    taken = api.post("/work/start/", {"agent": unique("nyx"), "issue": issue["id"]}, expect=201)
    assert taken["lease"]["session"] != session
    proxy.up()
    assert runner.wait() == 1
    assert "expired" in runner.stderr
    assert (control / "terminated").exists()
