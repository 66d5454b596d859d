"""``projektor hold`` and ``projektor run --hold`` against a live server, as agents use
them: real processes, a scripted command that reports its environment and waits to be
let go, the holds read back from the server."""

import os
import signal

from tests.agent.conftest import agent_command, read_json, released, unique, wait_until
from tests.agent.test_runner import control_dir, started


def resource(api, name: str = "", capacity: int = 1) -> str:
    name = name or unique("db:test-")
    api.post("/resources/", {"name": name, "capacity": capacity}, expect=201)
    return name


def holds(api, name: str, **query) -> list[dict]:
    return api.get("/resource-holds/", resource=name, **query)["results"]


def in_use(api, name: str) -> int:
    return api.get(f"/resources/{name}/")["in_use"]


def hold(projektor, repo, name, control, *behaviour, options=(), agent="", wait=False, **env):
    """``projektor hold NAME [options] -- scripted_agent CONTROL [behaviour]``."""
    return projektor(
        "hold",
        name,
        *options,
        *agent_command(control, *behaviour),
        cwd=repo,
        agent=agent or unique("holder"),
        wait=wait,
        **env,
    )


def test_hold_runs_the_command_with_its_slots_and_releases_at_exit(api, projektor, repo, tmp_path):
    ports, control = resource(api, unique("ports-"), capacity=4), control_dir(tmp_path)
    issue = api.issue(api.project())
    done = hold(
        projektor,
        repo,
        ports,
        control,
        options=("--units", "2", "--issue", str(issue["id"])),
        agent="atlas",
        wait=True,
    )
    assert done.returncode == 0, done.stderr
    env = read_json(control / "started.json")["env"]
    assert env["PROJEKTOR_SLOTS"] == "0,1" and env["PROJEKTOR_SLOT"] == "0"
    [held] = holds(api, ports)
    assert held["units"] == 2 and held["slots"] == [0, 1] and held["issue"] == issue["id"]
    assert held["agent"] == "atlas" and held["release_reason"] == "released"
    # Its session was its own: ended at exit, never the environment's.
    assert "PROJEKTOR_SESSION" not in env
    assert api.session(held["session"])["status"] == "ended"
    assert in_use(api, ports) == 0
    assert "Traceback" not in done.stderr


def test_hold_exits_with_the_failing_commands_status_and_releases(api, projektor, repo, tmp_path):
    name, control = resource(api), control_dir(tmp_path)
    done = hold(projektor, repo, name, control, "--exit", "7", wait=True)
    assert done.returncode == 7, done.stderr
    [held] = holds(api, name)
    assert held["release_reason"] == "released"
    assert api.session(held["session"])["status"] == "ended"


def test_sigterm_to_hold_reaches_the_command_and_the_hold_is_released(
    api, projektor, repo, tmp_path
):
    name, control = resource(api), control_dir(tmp_path)
    holder = hold(projektor, repo, name, control, "--wait")
    started(control, holder)
    [held] = holds(api, name, active="true")
    assert held["live"]
    holder.process.send_signal(signal.SIGTERM)
    assert holder.wait() == 143, holder.stderr  # the command's: it exited 143 on SIGTERM
    assert (control / "terminated").read_text() == str(int(signal.SIGTERM))
    [held] = holds(api, name)
    assert held["release_reason"] == "released"
    assert api.session(held["session"])["status"] == "ended"
    assert "Traceback" not in holder.stderr


def test_a_command_killed_by_a_signal_is_the_exit_status_and_the_hold_is_released(
    api, projektor, repo, tmp_path
):
    name, control = resource(api), control_dir(tmp_path)
    holder = hold(projektor, repo, name, control, "--wait", "--ignore-term")
    child = started(control, holder)
    os.kill(child["pid"], signal.SIGKILL)
    assert holder.wait() == 128 + signal.SIGKILL, holder.stderr
    [held] = holds(api, name)
    assert held["release_reason"] == "released"


def test_a_second_hold_is_refused_naming_the_holder_or_waits_for_it(api, projektor, repo, tmp_path):
    name = resource(api, capacity=1)
    issue = api.issue(api.project())
    first, waiter, refused_control = (control_dir(tmp_path) for _ in range(3))
    holder = hold(
        projektor, repo, name, first, "--wait", options=("--issue", str(issue["id"])), agent="atlas"
    )
    started(first, holder)

    refused = hold(projektor, repo, name, refused_control, options=("--wait", "0"), wait=True)
    assert refused.returncode == 1, refused.stderr
    assert f"held by agent atlas for issue {issue['id']} (1 unit)" in refused.stderr
    assert "0 available, 0 waiting" in refused.stderr
    assert not (refused_control / "started.json").exists()  # the command never ran
    assert "Traceback" not in refused.stderr

    second = hold(projektor, repo, name, waiter, options=("--wait", "50"), agent="boreas")
    wait_until(lambda: api.get(f"/resources/{name}/")["waiting"] == 1, "the second to wait")
    assert not (waiter / "started.json").exists()
    released(first)  # the first command ends: its hold is released, the second runs
    assert holder.wait() == 0, holder.stderr
    child = started(waiter, second)
    assert child["env"]["PROJEKTOR_SLOTS"] == "0"
    assert second.wait() == 0, second.stderr
    assert [h["agent"] for h in holds(api, name)] == ["boreas", "atlas"]  # newest first
    assert all(h["release_reason"] == "released" for h in holds(api, name))


def test_hold_inside_a_runner_holds_in_its_session_and_leaves_it_live(
    api, projektor, repo, tmp_path
):
    name, control = resource(api, capacity=2), control_dir(tmp_path)
    issue = api.issue(api.project())
    session = api.post("/sessions/", {"agent": unique("runner")}, expect=201)["id"]
    done = hold(
        projektor,
        repo,
        name,
        control,
        wait=True,
        PROJEKTOR_SESSION=str(session),
        PROJEKTOR_ISSUE=str(issue["id"]),
    )
    assert done.returncode == 0, done.stderr
    [held] = holds(api, name)
    assert (held["session"], held["issue"]) == (session, issue["id"])
    assert held["release_reason"] == "released"
    assert api.session(session)["status"] != "ended"  # the runner's, which it ends


def test_hold_of_what_is_not_there_is_a_usage_error(api, projektor, repo, tmp_path):
    control = control_dir(tmp_path)
    missing = hold(projektor, repo, unique("nothing-"), control, wait=True)
    assert missing.returncode == 2, missing.stderr
    bad = hold(projektor, repo, "Not A Name", control, wait=True)
    assert bad.returncode == 2 and "not a resource name" in bad.stderr
    no_command = projektor("hold", resource(api), cwd=repo, agent=unique("a"))
    assert no_command.returncode == 2 and "no command" in no_command.stderr
    for done in (missing, bad, no_command):
        assert "Traceback" not in done.stderr
    assert not (control / "started.json").exists()


# --- projektor run --hold ----------------------------------------------------------------------


def test_run_hold_passes_the_slots_to_the_agent_and_releases_at_the_hand_in(
    api, projektor, repo, tmp_path
):
    db, ports = resource(api, unique("db:test-"), 2), resource(api, unique("ports-"), 4)
    issue, control = api.issue(api.project()), control_dir(tmp_path)
    runner = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--hold",
        f"{ports}:2",
        "--hold",
        db,
        *agent_command(control, "--wait", "--edit", "src/x.py", "--commit", "Add x"),
        cwd=repo,
        agent=unique("atlas"),
        wait=False,
    )
    env = started(control, runner)["env"]
    session = int(env["PROJEKTOR_SESSION"])
    variable = "PROJEKTOR_SLOTS_" + db.upper().replace(":", "_").replace("-", "_")
    assert env[variable] == "0"
    assert env["PROJEKTOR_SLOTS_" + ports.upper().replace("-", "_")] == "0,1"
    assert "PROJEKTOR_SLOTS" not in env and "PROJEKTOR_SLOT" not in env  # two holds
    for name in (db, ports):
        [held] = holds(api, name, active="true")
        assert (held["session"], held["issue"]) == (session, issue["id"])
    # In name order: the one named first was taken first.
    first, second = sorted([db, ports])
    assert holds(api, first)[0]["acquired_at"] <= holds(api, second)[0]["acquired_at"]

    released(control)
    assert runner.wait() == 0, runner.stderr
    assert api.get(f"/issues/{issue['id']}/")["status"] == "in_review"
    for name in (db, ports):
        [held] = holds(api, name)
        assert held["release_reason"] == "released"
        assert in_use(api, name) == 0


def test_run_hold_of_a_busy_resource_gives_the_issue_back_naming_the_holder(
    api, projektor, repo, tmp_path
):
    name = resource(api, capacity=1)
    holder_control, control = control_dir(tmp_path), control_dir(tmp_path)
    holder = hold(projektor, repo, name, holder_control, "--wait", agent="atlas")
    started(holder_control, holder)
    issue = api.issue(api.project())
    done = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--hold",
        name,
        "--hold-wait",
        "1",
        *agent_command(control),
        cwd=repo,
        agent=unique("boreas"),
    )
    assert done.returncode == 1, done.stderr
    assert not (control / "started.json").exists()  # the agent never ran
    back = api.get(f"/issues/{issue['id']}/")
    assert back["status"] == "todo" and back["lease"] is None
    [message] = [body for body in api.messages(issue["id"]) if "gave issue" in body]
    assert "held by agent atlas" in message
    assert "Traceback" not in done.stderr
    released(holder_control)
    assert holder.wait() == 0


def test_run_hold_is_released_at_the_give_back_and_the_single_hold_is_projektor_slots(
    api, projektor, repo, tmp_path
):
    name, control = resource(api, capacity=3), control_dir(tmp_path)
    issue = api.issue(api.project())
    done = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--hold",
        f"{name}:2",
        *agent_command(control, "--exit", "3"),
        cwd=repo,
        agent=unique("castor"),
    )
    assert done.returncode == 1, done.stderr
    env = read_json(control / "started.json")["env"]
    assert env["PROJEKTOR_SLOTS"] == "0,1" and env["PROJEKTOR_SLOT"] == "0"
    [held] = holds(api, name)
    assert held["release_reason"] == "released" and held["issue"] == issue["id"]
    assert api.get(f"/issues/{issue['id']}/")["status"] == "todo"


def test_run_hold_of_what_is_not_there_takes_nothing(api, projektor, repo, tmp_path):
    issue, control = api.issue(api.project()), control_dir(tmp_path)
    done = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--hold",
        unique("nothing-"),
        *agent_command(control),
        cwd=repo,
        agent=unique("orion"),
    )
    assert done.returncode == 2, done.stderr
    assert "nothing taken" in done.stderr and "Traceback" not in done.stderr
    assert api.leases(issue["id"]) == []
    too_many = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--hold",
        f"{resource(api, capacity=1)}:2",
        *agent_command(control),
        cwd=repo,
        agent=unique("orion"),
    )
    assert too_many.returncode == 2 and "nothing taken" in too_many.stderr
    assert api.leases(issue["id"]) == []


def test_hold_specs_and_their_environment_names():
    from projektor_agent.resources import Wanted, variable, wanted

    assert Wanted.parsed("db:test") == Wanted("db:test", 1)
    assert Wanted.parsed("ports:3") == Wanted("ports", 3)
    assert Wanted.parsed("gpu:0:1") == Wanted("gpu:0", 1)
    assert [w.name for w in wanted(["ports", "db:test", "migrations"])] == [
        "db:test",
        "migrations",
        "ports",
    ]
    assert variable("db:test.v2-x") == "PROJEKTOR_SLOTS_DB_TEST_V2_X"


def test_a_command_whose_hold_is_taken_is_stopped(api, projektor, repo, tmp_path):
    """Its session ended by someone else: the hold went with it (``agent_ended``), and
    the command is stopped as a runner's agent is when its work is taken."""
    name, control = resource(api), control_dir(tmp_path)
    holder = hold(projektor, repo, name, control, "--wait")
    started(control, holder)
    [held] = holds(api, name)
    api.post(f"/sessions/{held['session']}/end/", expect=200)
    assert holder.wait() == 143, holder.stderr
    assert (control / "terminated").exists()
    assert "no longer this command's" in holder.stderr
    [held] = holds(api, name)
    assert held["release_reason"] == "agent_ended"


def test_a_hold_taken_back_expired_while_the_server_was_away_stops_the_command(
    api, projektor, repo, tmp_path, proxy
):
    name, control = resource(api), control_dir(tmp_path)
    holder = hold(projektor, repo, name, control, "--wait", PROJEKTOR_URL=proxy.url)
    started(control, holder)
    proxy.down()  # no heartbeat reaches the server: the session dies after its TTL
    wait_until(lambda: in_use(api, name) == 0, "the dead session's unit to be free")
    rival = api.post("/sessions/", {"agent": unique("rival")}, expect=201)["id"]
    api.post(f"/resources/{name}/acquire/", {"session": rival}, expect=201)
    proxy.up()
    assert holder.wait() == 143, holder.stderr
    assert "went to another session: released expired" in holder.stderr
    taken, mine = holds(api, name)  # newest first
    assert (taken["session"], taken["release_reason"]) == (rival, None)
    assert mine["release_reason"] == "expired"
