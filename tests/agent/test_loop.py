"""Runners side by side: two racing for the same issue, a --loop runner waiting on
events for work, the runner's own signals, and a failing verification."""

import signal

from tests.agent.conftest import agent_command, read_json, released, unique, wait_until
from tests.agent.test_runner import control_dir, started


def test_two_runners_racing_for_the_same_issue_one_wins_the_other_takes_the_next(
    api, projektor, repo, tmp_path
):
    project = api.project()
    first, second = api.issue(project, "First"), api.issue(project, "Second")
    controls = [control_dir(tmp_path), control_dir(tmp_path)]
    runners = [
        projektor(
            "run",
            "--next",
            "--project",
            project,
            *agent_command(control, "--wait"),
            cwd=repo,
            agent=unique("racer"),
            wait=False,
        )
        for control in controls
    ]
    taken = [started(control, runner) for control, runner in zip(controls, runners, strict=True)]
    assert sorted(int(child["env"]["PROJEKTOR_ISSUE"]) for child in taken) == sorted(
        [first["id"], second["id"]]
    )
    for control in controls:
        released(control)
    assert [runner.wait() for runner in runners] == [0, 0]
    for issue in (first, second):
        handed = api.get(f"/issues/{issue['id']}/")
        assert handed["status"] == "in_review"
        assert len(api.leases(issue["id"])) == 1  # no work done twice


def test_a_loop_waits_on_events_for_work_and_stops_at_sigint_with_exit_0(
    api, projektor, repo, tmp_path
):
    project, control = api.project(), control_dir(tmp_path)
    runner = projektor(
        "run",
        "--loop",
        "--project",
        project,
        *agent_command(control),
        cwd=repo,
        agent=unique("sisyphus"),
        wait=False,
    )
    issue = api.issue(project, "Arrives later")
    wait_until(
        lambda: api.get(f"/issues/{issue['id']}/")["status"] == "in_review",
        "the loop to take the new issue and hand it in",
    )
    assert read_json(control / "started.json")["env"]["PROJEKTOR_ISSUE"] == str(issue["id"])
    runner.process.send_signal(signal.SIGINT)
    assert runner.wait() == 0, runner.stderr
    assert "Traceback" not in runner.stderr


def test_sigterm_then_sigint_stops_an_agent_that_ignores_sigterm_at_once(
    api, projektor, repo, tmp_path
):
    issue, control = api.issue(api.project()), control_dir(tmp_path)
    runner = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--grace",
        "600",
        *agent_command(control, "--wait", "--ignore-term"),
        cwd=repo,
        agent=unique("talos"),
        wait=False,
    )
    started(control, runner)
    runner.process.send_signal(signal.SIGTERM)
    wait_until(lambda: "passed to the agent" in runner.stderr, "the signal to be passed on")
    runner.process.send_signal(signal.SIGINT)
    assert runner.wait(timeout=60) == 1
    assert "again: stopping the agent now" in runner.stderr
    back = api.get(f"/issues/{issue['id']}/")
    assert back["status"] == "todo" and back["lease"] is None
    [message] = [body for body in api.messages(issue["id"]) if "gave issue" in body]
    assert "interrupted" in message and "SIGKILL" in message


def test_a_failing_verification_is_a_failed_run_not_a_hand_in(api, projektor, repo, tmp_path):
    issue, control = api.issue(api.project()), control_dir(tmp_path)
    done = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--verify",
        "echo 3 tests failed; exit 1",
        *agent_command(control, "--report", '{"summary": "All done"}'),
        cwd=repo,
        agent=unique("ursa"),
    )
    assert done.returncode == 1, done.stderr
    back = api.get(f"/issues/{issue['id']}/")
    assert back["status"] == "todo" and back["report"] is None
    [message] = [body for body in api.messages(issue["id"]) if "gave issue" in body]
    assert "verification failed" in message and "3 tests failed" in message
    [run] = api.get("/runs/", issue=issue["id"])["results"]
    assert run["status"] == "failed"


def test_the_agents_report_json_and_a_passing_verification_make_the_report(
    api, projektor, repo, tmp_path
):
    issue, control = api.issue(api.project()), control_dir(tmp_path)
    report = '{"summary": "Rewrote the router", "pr_link": "https://example.com/pr/7"}'
    done = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--verify",
        "echo 12 passed",
        *agent_command(control, "--report", report),
        cwd=repo,
        agent=unique("vesta"),
    )
    assert done.returncode == 0, done.stderr
    handed = api.get(f"/issues/{issue['id']}/")["report"]
    assert handed["summary"] == "Rewrote the router"
    assert handed["pr_link"] == "https://example.com/pr/7"
    assert (
        "exited with status 0" in handed["verification"] and "12 passed" in handed["verification"]
    )


def test_next_passes_over_a_project_at_its_wip_limit_to_another_projects_issue(
    api, projektor, repo, tmp_path
):
    full = unique("p")
    api.post("/projects/", {"key": full, "name": full, "agent_wip_limit": 1}, expect=201)
    held = api.issue(full, "Held by another agent")
    api.post("/work/start/", {"agent": unique("holder"), "issue": held["id"]}, expect=201)
    urgent = api.issue(full, "Urgent, but its project is full", priority=1)
    other = api.issue(api.project(), "Another project's work", priority=4)
    ready_ids = [i["id"] for i in api.get("/issues/ready/")["results"]]
    assert ready_ids.index(urgent["id"]) < ready_ids.index(other["id"])
    control = control_dir(tmp_path)

    runner = projektor("run", "--next", *agent_command(control), cwd=repo, agent=unique("overflow"))

    assert runner.returncode == 0, runner.stderr
    assert read_json(control / "started.json")["env"]["PROJEKTOR_ISSUE"] == str(other["id"])
    assert api.get(f"/issues/{other['id']}/")["status"] == "in_review"
    assert api.get(f"/issues/{urgent['id']}/")["status"] == "todo"


def test_an_issue_a_loop_gave_back_goes_to_another_runner_first(api, projektor, repo, tmp_path):
    project = api.project()
    first, second = unique("icarus"), unique("daedalus")
    failing = projektor(
        "run",
        "--loop",
        "--project",
        project,
        *agent_command(control_dir(tmp_path), "--fail-once"),
        cwd=repo,
        agent=first,
        wait=False,
    )
    issue = api.issue(project, "Fails on its first try")

    def given_back() -> bool:  # its message, the issue in todo, its lease released
        leases = api.leases(issue["id"])
        return (
            any("gave issue" in body for body in api.messages(issue["id"]))
            and api.get(f"/issues/{issue['id']}/")["status"] == "todo"
            and bool(leases)
            and all(lease["released_at"] for lease in leases)
        )

    wait_until(given_back, "the first runner to give the issue back")
    control = control_dir(tmp_path)
    other = projektor(
        "run", "--issue", str(issue["id"]), *agent_command(control), cwd=repo, agent=second
    )

    assert other.returncode == 0, other.stderr
    assert api.get(f"/issues/{issue['id']}/")["status"] == "in_review"
    leases = sorted(api.leases(issue["id"]), key=lambda lease: lease["id"])
    assert [lease["agent"] for lease in leases] == [first, second]
    assert failing.process.poll() is None, failing.stderr  # still looping, not retaking
