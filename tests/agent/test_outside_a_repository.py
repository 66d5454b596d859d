"""``projektor run`` in a directory that is in no git repository: it says so, refuses
the work that requires the filesystem before taking anything, and still runs the work
that needs no files (lock mode none)."""

from tests.agent.conftest import agent_command, unique
from tests.agent.test_runner import control_dir

NOT_A_REPOSITORY = "is not in a git repository"


def plain_directory(tmp_path):
    where = tmp_path / "plain"
    where.mkdir()
    return where


def test_work_that_requires_the_filesystem_is_refused_before_it_is_taken(api, projektor, tmp_path):
    issue = api.issue(api.project(), "Edit the files", requires_filesystem=True)
    done = projektor(
        "run",
        "--issue",
        str(issue["id"]),
        *agent_command(control_dir(tmp_path)),
        cwd=plain_directory(tmp_path),
        agent=unique("gaia"),
    )
    assert done.returncode == 2, done.stderr
    assert NOT_A_REPOSITORY in done.stderr and "requires the filesystem" in done.stderr
    assert api.get(f"/issues/{issue['id']}/")["status"] == "todo"
    assert api.leases(issue["id"]) == []
    assert api.get("/runs/", issue=issue["id"])["results"] == []


def test_the_queue_gives_it_only_the_work_that_needs_no_files(api, projektor, tmp_path):
    project = api.project()
    files = api.issue(project, "Edit the files", requires_filesystem=True)
    thinking = api.issue(project, "Decide the naming")
    control = control_dir(tmp_path)
    done = projektor(
        "run",
        "--next",
        *agent_command(control),
        cwd=plain_directory(tmp_path),
        agent=unique("gaia"),
    )
    assert done.returncode == 0, done.stderr
    assert NOT_A_REPOSITORY in done.stderr
    assert api.get(f"/issues/{thinking['id']}/")["status"] == "in_review"
    assert api.get(f"/issues/{files['id']}/")["status"] == "todo"
    assert api.leases(files["id"]) == []
    again = projektor(
        "run", "--next", *agent_command(control), cwd=tmp_path / "plain", agent=unique("gaia")
    )
    assert again.returncode == 1 and "nothing to take" in again.stderr
    assert api.leases(files["id"]) == []
