"""A landing tester's adaptive batch size (``context.BatchSize``): it starts at the
largest (``--batch-max``), grows by one after a green batch up to that largest, and halves
after a red one down to 1; and ``--batch-max`` outside 1..32 is a usage error (exit 2)
of ``projektor land`` and ``projektor run --queue``, before anything is taken."""

import pytest

from projektor_agent import landing
from projektor_agent.context import BatchSize


def test_it_starts_at_the_largest():
    assert BatchSize(4).now == 4
    assert BatchSize(32).now == 32
    assert BatchSize(8, now=3).now == 3  # a size carried over stays


def test_green_grows_it_by_one_up_to_the_largest():
    size = BatchSize(5, now=2)
    seen = []
    for _ in range(5):
        size.green()
        seen.append(size.now)
    assert seen == [3, 4, 5, 5, 5]


def test_red_halves_it_down_to_one():
    size = BatchSize(32)
    seen = []
    for _ in range(7):
        size.red()
        seen.append(size.now)
    assert seen == [16, 8, 4, 2, 1, 1, 1]
    odd = BatchSize(7)
    odd.red()
    assert odd.now == 3  # halved down


def test_a_largest_of_one_stays_one():
    size = BatchSize(1)
    size.green()
    assert size.now == 1
    size.red()
    assert size.now == 1


def test_after_red_it_climbs_back_one_green_batch_at_a_time():
    size = BatchSize(4)
    size.red()
    size.red()
    assert size.now == 1
    climbed = []
    for _ in range(4):
        size.green()
        climbed.append(size.now)
    assert climbed == [2, 3, 4, 4]
    size.red()
    size.green()
    assert size.now == 3


@pytest.mark.parametrize("value", ["0", str(landing.MAX_BATCH + 1)])
def test_batch_max_outside_1_to_32_is_a_usage_error_before_anything_is_taken(
    api, projektor, repo, tmp_path, value
):
    project = api.project()
    issue = api.issue(project, "Not taken")
    run = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        "--worktrees",
        str(tmp_path / "wt"),
        "--integrate",
        "--queue",
        "--verify",
        "true",
        "--batch-max",
        value,
        "--",
        "true",
        cwd=repo,
        agent="runner",
    )
    land = projektor(
        "land", "--verify", "true", "--project", project, "--batch-max", value, cwd=repo
    )
    for done in (run, land):
        assert done.returncode == 2, done.stderr
        assert f"--batch-max is {value}: give 1 to 32" in done.stderr
        assert "Traceback" not in done.stderr
    assert api.get(f"/issues/{issue['id']}/")["lease"] is None
    assert api.get("/sessions/", agent="runner")["results"] == []
    assert api.get("/landings/", project=project)["results"] == []


def test_batch_max_at_its_bounds_is_taken(api, projektor, repo):
    project = api.project()
    for value in ("1", "32"):
        done = projektor(
            "land",
            "--verify",
            "true",
            "--project",
            project,
            "--batch-max",
            value,
            cwd=repo,
            agent="lander",
        )
        assert done.returncode == 0, done.stderr  # one take of an empty queue
