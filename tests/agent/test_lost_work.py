"""The runner stops its agent the moment the work is no longer its own: the issue
closed, its claims taken by force, its lease reclaimed while the server was away;
and a child that ignores SIGTERM is killed after the grace period."""

import signal

from projektor_agent.supervise import lost_because
from tests.agent.conftest import TTL, agent_command, read_json, unique, wait_until
from tests.agent.test_runner import control_dir, gone, started


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
    # A closed issue is not the runner's to put back.
    assert "back to todo" not in runner.stderr
    assert not any("back in todo" in body for body in api.messages(issue["id"]))


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
    # Only its claims went: its lease was still its own, so the issue is back in the
    # queue (not left in progress with no one on it), and the issue's thread says why.
    after = api.get(f"/issues/{issue['id']}/")
    assert (after["status"], after["lease"]) == ("todo", None)
    assert "no other session holds it: back to todo" in runner.stderr
    said = api.messages(issue["id"])
    assert any("overridden" in body and "back in todo" in body for body in said), said


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
    # Its lease is another's now: the runner leaves the issue to its new holder.
    after = api.get(f"/issues/{issue['id']}/")
    assert after["status"] == "in_progress"
    assert after["lease"]["session"] == taken["lease"]["session"]
    assert "back to todo" not in runner.stderr


def test_who_took_the_work_is_named_as_the_event_names_them():
    """An operator by name, an agent by name with its session, a key by name: never
    "agent None (session None)"."""
    from coordination.services.events import holder
    from coordination.services.operators import by_operator

    def said(by):
        data = {"reason": "overridden", **({"by": by} if by is not None else {})}
        return lost_because({"type": "lease.released", "data": data})

    lost = "its lease went to another session: released overridden"
    assert said(by_operator("admin")) == f"{lost} by operator admin"
    assert said(holder(14, "coder-2")) == f"{lost} by agent coder-2 (session 14)"
    assert said({"session": None, "agent": None, "key": "ci-bot"}) == f"{lost} by key ci-bot"
    assert said(None) == lost
