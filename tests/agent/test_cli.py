"""The command's configuration, its subcommands and their exit statuses: 0 done,
1 refused, 2 usage or configuration, 3 unreachable; never a traceback."""

import json
import subprocess
import sys

import pytest

from tests.agent.conftest import clean_env, unique

CLOSED_PORT_URL = "http://127.0.0.1:9"


def bare(*args, cwd, **env):
    return subprocess.run(
        [sys.executable, "-m", "projektor_agent", *args],
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_missing_configuration_names_the_variable_and_the_git_key(tmp_path, repo, live):
    done = bare("whoami", cwd=tmp_path)
    assert done.returncode == 2
    assert "PROJEKTOR_URL (or git config projektor.url)" in done.stderr
    assert "PROJEKTOR_API_KEY (or git config projektor.apiKey)" in done.stderr
    bad = bare("whoami", cwd=tmp_path, PROJEKTOR_URL="ftp://x", PROJEKTOR_API_KEY="k")
    assert bad.returncode == 2 and "http://" in bad.stderr
    # git config is read when the environment says nothing.
    subprocess.run(["git", "config", "projektor.url", live.url], cwd=repo, env=clean_env())
    subprocess.run(["git", "config", "projektor.apiKey", "wrong"], cwd=repo, env=clean_env())
    wrong = bare("whoami", cwd=repo)
    assert wrong.returncode == 2 and "PROJEKTOR_API_KEY" in wrong.stderr
    for done in (bad, wrong):
        assert "Traceback" not in done.stderr


def test_an_unreachable_server_is_exit_3(tmp_path):
    done = bare("ready", cwd=tmp_path, PROJEKTOR_URL=CLOSED_PORT_URL, PROJEKTOR_API_KEY="k")
    assert done.returncode == 3 and "cannot reach" in done.stderr
    assert "Traceback" not in done.stderr


def test_subcommands_answer_in_text_or_json_and_a_refusal_names_the_holder(api, projektor, repo):
    project = api.project()
    issue = api.issue(project, "Tidy the router")
    me = projektor("whoami", "--json", cwd=repo, agent="atlas")
    assert me.returncode == 0 and json.loads(me.stdout)["kind"] == "fleet"
    ready = projektor("ready", "--project", project, cwd=repo)
    assert ready.returncode == 0 and "Tidy the router" in ready.stdout
    shown = projektor("show", str(issue["id"]), "--json", cwd=repo)
    assert json.loads(shown.stdout)["title"] == "Tidy the router"

    started = projektor(
        "start", str(issue["id"]), "src/router.py", "--json", cwd=repo, agent="atlas"
    )
    assert started.returncode == 0, started.stderr
    session = json.loads(started.stdout)["session"]["id"]
    inside = {"PROJEKTOR_SESSION": str(session), "PROJEKTOR_ISSUE": str(issue["id"])}
    assert projektor("heartbeat", cwd=repo, **inside).returncode == 0
    assert projektor("claim", "src/urls.py", cwd=repo, **inside).returncode == 0

    other = api.issue(project, "Another")
    check = projektor("check", "src/urls.py", "--issue", str(other["id"]), cwd=repo)
    assert check.returncode == 1
    assert f"src/urls.py is claimed by issue {issue['id']} (agent atlas)" in check.stdout
    held = projektor("start", str(issue["id"]), "--json", cwd=repo, agent="boreas")
    assert held.returncode == 1
    assert f"issue {issue['id']} (agent atlas" in held.stderr
    assert json.loads(held.stdout)["error"]["code"] == "lease_held"
    theirs = {"PROJEKTOR_SESSION": str(session), "PROJEKTOR_ISSUE": str(other["id"])}
    conflict = projektor("claim", "src/router.py", cwd=repo, **theirs)
    assert conflict.returncode == 1
    assert f"src/router.py is claimed by issue {issue['id']} (agent atlas)" in conflict.stderr

    posted = projektor("message", f"issue:{issue['id']}", "Almost there", cwd=repo, **inside)
    assert posted.returncode == 0
    events = projektor("events", "--issue", str(issue["id"]), "--json", cwd=repo)
    assert events.returncode == 0 and '"message.posted"' in events.stdout
    finished = projektor(
        "finish", "--summary", "Tidied", "--verification", "make test", cwd=repo, **inside
    )
    assert finished.returncode == 0, finished.stderr
    assert api.get(f"/issues/{issue['id']}/")["status"] == "in_review"
    usage = projektor("start", cwd=repo)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    for done in (held, conflict, check, usage):
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("program", "said"),
    [
        ("no-such-agent-xyz", "not found on PATH"),
        ("./missing-agent.sh", "does not exist"),
        ("./README.md", "is not executable"),
    ],
)
@pytest.mark.parametrize("which", ["--issue", "--next"])
def test_an_agent_command_that_cannot_run_is_exit_2_before_anything_is_taken(
    api, projektor, repo, program, said, which
):
    issue = api.issue(api.project())
    before = api.get("/events/")["events"]
    done = projektor(
        "run",
        *(["--issue", str(issue["id"])] if which == "--issue" else ["--next"]),
        "--",
        program,
        "{issue}",
        cwd=repo,
        agent=unique("orion"),
    )
    assert done.returncode == 2, done.stderr
    assert program in done.stderr and said in done.stderr and "Traceback" not in done.stderr
    back = api.get(f"/issues/{issue['id']}/")
    assert back["status"] == "todo" and back["lease"] is None
    assert api.leases(issue["id"]) == []
    assert api.get("/runs/", issue=issue["id"])["results"] == []
    assert api.messages(issue["id"]) == []
    assert api.get("/events/")["events"] == before  # no session, lease, run or message


def test_every_subcommand_says_the_same_of_an_issue_that_does_not_exist(projektor, repo):
    said = "projektor: Issue 999999 does not exist."
    agent = unique("orion")
    shown = projektor("show", "999999", cwd=repo, agent=agent)
    started = projektor("start", "999999", cwd=repo, agent=agent)
    run = projektor("run", "--issue", "999999", "--", "true", cwd=repo, agent=agent)
    for done in (shown, started, run):
        assert done.returncode == 2 and said in done.stderr.splitlines(), done.stderr


def test_run_without_work_or_command_is_a_usage_error(projektor, repo):
    assert projektor("run", "--next", cwd=repo, agent="x").returncode == 2
    assert projektor("run", "--", "true", cwd=repo, agent="x").returncode == 2


def test_the_guard_is_a_subcommand(api, live, repo):
    (repo / "src" / "held.py").write_text("x = 1\n")
    subprocess.run(["git", "add", "src/held.py"], cwd=repo, env=clean_env(), check=True)
    project = api.project()
    issue = api.issue(project)
    theirs = api.post("/work/start/", {"agent": "atlas", "issue": issue["id"]}, expect=201)
    other = api.issue(project, "Mine")
    api.post(
        "/file-claims/",
        {"issue": issue["id"], "paths": ["src/held.py"], "session": theirs["session"]["id"]},
        expect=201,
    )
    env = {"PROJEKTOR_URL": live.url, "PROJEKTOR_API_KEY": api.key}
    refused = bare("guard", "pre-commit", cwd=repo, PROJEKTOR_ISSUE=str(other["id"]), **env)
    assert refused.returncode == 1
    assert f"issue {issue['id']}, agent atlas" in refused.stderr
    unchecked = bare(
        "guard",
        "pre-commit",
        cwd=repo,
        PROJEKTOR_ISSUE="1",
        PROJEKTOR_URL=CLOSED_PORT_URL,
        PROJEKTOR_API_KEY="k",
    )
    assert unchecked.returncode == 0 and "warning" in unchecked.stderr
