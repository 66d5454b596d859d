"""`projektor ready` against a live server: blocked issues are left out, and each
issue names its collisions with what others hold, the free ones first (invariant 16 (the work
graph))."""

import json

from projektor_agent.runner import spread
from tests.agent.conftest import agent_command, released, unique
from tests.agent.test_runner import control_dir, started


def test_ready_shows_collisions_and_leaves_blocked_work_out(api, projektor, repo):
    project = api.project()
    held = api.issue(project, "Held work", paths=["src/api/"])
    api.post("/work/start/", {"agent": "atlas", "issue": held["id"]}, expect=201)
    colliding = api.issue(project, "Colliding work", paths=["src/api/views.py"])
    free = api.issue(project, "Free work", paths=["docs/guide.md"])
    blocked = api.issue(project, "Blocked work")
    api.post(
        f"/issues/{free['id']}/links/", {"type": "blocks", "target": blocked["id"]}, expect=201
    )

    ready = projektor("ready", "--project", project, cwd=repo)

    assert ready.returncode == 0, ready.stderr
    lines = ready.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [f"#{free['id']}", f"#{colliding['id']}"]
    assert "(collides: src/api/views.py)" in lines[1] and "collides" not in lines[0]
    listed = json.loads(projektor("ready", "--project", project, "--json", cwd=repo).stdout)
    assert listed["results"][1]["collisions"] == [
        {"path": "src/api/views.py", "held_path": "src/api/", "issue": held["id"], "agent": "atlas"}
    ]


def test_run_next_takes_the_first_collision_free_issue_over_a_more_urgent_colliding_one(
    api, projektor, repo, tmp_path
):
    project, control = api.project(), control_dir(tmp_path)
    held = api.issue(project, "Held work", paths=["src/api/"])
    api.post("/work/start/", {"agent": unique("atlas"), "issue": held["id"]}, expect=201)
    colliding = api.issue(project, "Urgent, colliding", priority=1, paths=["src/api/views.py"])
    free = api.issue(project, "Low, free", priority=4, paths=["docs/guide.md"])
    heads = [row["id"] for row in api.get("/issues/ready/", project=project)["results"]]
    assert heads == [colliding["id"], free["id"]]  # the server ranks priority first

    runner = projektor(
        "run",
        "--next",
        "--project",
        project,
        *agent_command(control, "--wait"),
        cwd=repo,
        agent=unique("runner"),
        wait=False,
    )

    assert started(control, runner)["env"]["PROJEKTOR_ISSUE"] == str(free["id"])
    released(control)
    assert runner.wait() == 0, runner.stderr
    assert api.get(f"/issues/{free['id']}/")["status"] == "in_review"
    assert api.get(f"/issues/{colliding['id']}/")["status"] == "todo"


def test_run_next_takes_nothing_when_every_issue_collides(api, projektor, repo, tmp_path):
    """An issue whose declared files another issue holds is not tried (its start would
    be refused and logged as a conflict): the runner names them and says there is
    nothing to take, and no start was refused."""
    project, control = api.project(), control_dir(tmp_path)
    held = api.issue(project, "Held work", paths=["src/"])
    api.post("/work/start/", {"agent": unique("atlas"), "issue": held["id"]}, expect=201)
    first = api.issue(project, "Urgent, colliding", priority=1, paths=["src/a.py"])
    second = api.issue(project, "Low, colliding", priority=4, paths=["src/b.py"])

    run = projektor(
        "run",
        "--next",
        "--project",
        project,
        *agent_command(control),
        cwd=repo,
        agent=unique("runner"),
    )

    assert run.returncode == 1, run.stderr
    assert "nothing to take" in run.stderr
    assert f"issues {first['id']}, {second['id']}: their declared files are held" in run.stderr
    assert "taken first" not in run.stderr
    for issue in (first, second):  # no start tried: no conflict logged
        assert api.get("/claim-conflicts/", issue=issue["id"])["count"] == 0
    assert not (control / "started.json").exists()
    for issue in (first, second):
        assert api.get(f"/issues/{issue['id']}/")["status"] == "todo"
        assert api.leases(issue["id"]) == []


def test_with_its_own_paths_a_runner_still_takes_an_issue_whose_declared_files_are_held(
    api, projektor, repo, tmp_path
):
    """--paths: the start claims the runner's paths, not the issue's declared ones, so a
    colliding issue is tried (last) and taken."""
    project, control = api.project(), control_dir(tmp_path)
    held = api.issue(project, "Held work", paths=["src/"])
    api.post("/work/start/", {"agent": unique("atlas"), "issue": held["id"]}, expect=201)
    colliding = api.issue(project, "Colliding", paths=["src/a.py"])

    runner = projektor(
        "run",
        "--next",
        "--project",
        project,
        "--paths",
        "docs/a.md",
        *agent_command(control, "--wait"),
        cwd=repo,
        agent=unique("runner"),
        wait=False,
    )

    assert started(control, runner)["env"]["PROJEKTOR_ISSUE"] == str(colliding["id"])
    released(control)
    assert runner.wait() == 0, runner.stderr
    assert api.get(f"/issues/{colliding['id']}/")["status"] == "in_review"


def test_a_runner_that_lost_a_race_tries_next_at_a_place_of_its_own():
    """Runners woken together race for the queue's head; the losers go on from places
    that differ by agent, not all down the queue in step. Nothing is left out."""
    queue = list(range(10))
    orders = {agent: spread(queue, agent) for agent in ("coder-1", "coder-2", "coder-3")}
    for order in orders.values():
        assert sorted(order) == queue
        start = order[0]
        assert order == queue[start:] + queue[:start]  # the queue's order, from a place
    assert len({order[0] for order in orders.values()}) > 1
    assert spread(queue, "coder-1") == orders["coder-1"]  # the same place every time
    assert spread([7], "coder-1") == [7] and spread([], "coder-1") == []
