"""`projektor ready` against a live server: blocked issues are left out, and each
issue names its collisions with what others hold, the free ones first (invariant 16)."""

import json


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
