"""``demo_fleet`` as ``make run`` runs it: a process beside a live server (gunicorn, the
suite's harness), on the demo seeded in the test database, its runners real
``projektor run --loop`` processes with the scripted agent on a demo repository made
in a temporary folder. Their work lands on the repository's ``main`` through the
landing queue, tested by the runners with the repository's check, and is handed in;
SIGTERM stops the command and every process it started. Every wait is on a condition."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import datetime
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db.models import QuerySet
from django.utils import timezone

from coordination.models import (
    AgentSession,
    ApiKey,
    Issue,
    Landing,
    ReleaseReason,
    ResourceHold,
    Run,
    Workspace,
)
from coordination.services.graph import expected_paths
from demo import access, world
from demo.fleet.place import CHECK, files_for
from tests.demo.conftest import FleetProcess, processes_under, served, wait_until
from tests.readme import run_shell, shell_blocks

pytestmark = pytest.mark.django_db(transaction=True)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def test_runners_land_real_work_on_the_demo_repository_and_stop_with_the_fleet(
    small_demo: Workspace, demo_dir: Path, tmp_path: Path
) -> None:
    demo, place, repo = small_demo, demo_dir, demo_dir / "repo"
    banner = StringIO()
    call_command("seed_demo", stdout=banner)  # as make run prints it, before the fleet starts
    with served(tmp_path) as (url, env):
        began = timezone.now()
        fleet = FleetProcess(url, place, env, "--agents", "3", "--work", "1,3")
        try:
            wait_until(lambda: "at work on" in fleet.output(), "the fleet at work")
            issue = handed_in_by_a_runner(demo, began)
            # The fleet has taken and landed work; the banner's free issue is still free.
            toured = the_readme_agent_tour(banner.getvalue(), url, tmp_path)
        finally:
            status = fleet.stop()
    assert toured.status == Issue.Status.IN_REVIEW
    assert toured.report["summary"] == "Added rate limits."
    text = fleet.output()
    assert status == 0, text
    assert "3 runners and a reviewer at work" in text
    summary = text.strip().splitlines()[-1]
    assert " 0 5xx" in summary, text
    assert re.search(r" [1-9]\d* commits landed on main", summary), summary
    assert processes_under(place) == []
    runners = AgentSession.objects.filter(workspace=demo, started_at__gte=began)
    # Its work is on main: the scripted agent's commit (its trailer names the issue),
    # touching files the issue names.
    first = git(repo, "rev-list", "--max-parents=0", "main").strip()
    grep = f"--grep=^Workbench-Issue: {issue.pk}$"
    commit = git(repo, "log", "--format=%H", grep, f"{first}..main").split()[0]
    touched = set(git(repo, "show", "--name-only", "--format=", commit).split())
    named = {file for path in expected_paths(issue) for file in files_for(path)}
    assert touched & named, (touched, named)
    # It landed through the queue: its entry landed as that commit, tested by a runner.
    entry = Landing.objects.filter(issue=issue, landed_commit=commit).first()
    assert entry is not None and entry.state == Landing.State.LANDED, text
    assert runners.filter(pk=entry.tester_id).exists()
    assert "by the landing queue" in issue.report["verification"]
    the_fleet_landed_through_the_queue(demo, repo, runners)
    # Its run was on the agent's own worktree, a checkout of the demo repository.
    run = Run.objects.filter(
        issue=issue, status=Run.Status.SUCCEEDED, worktree__slug__in=world.AGENT_NAMES
    ).first()
    assert run is not None and run.worktree is not None
    assert (place / "worktrees" / run.worktree.slug / ".git").exists()
    # Stopped, no runner's session is left live, and the fleet's key is revoked.
    assert runners.exists() and not runners.live().exists()
    # The agents' tests held a test database (projektor hold, in the runner's session,
    # for its issue), released at their end; none is held any more.
    tested = ResourceHold.objects.filter(
        resource__name=world.TEST_DB, session__in=runners, issue__isnull=False
    )
    assert tested.filter(release_reason=ReleaseReason.RELEASED).exists(), text
    assert not tested.filter(released_at__isnull=True).exists()
    assert "the tests passed, test-db held while they ran" in logs_of(place)
    keys = ApiKey.objects.filter(workspace=demo, name=access.FLEET_KEY_NAME)
    assert keys.count() == 1 and keys.get().revoked_at is not None


def the_fleet_landed_through_the_queue(
    demo: Workspace, repo: Path, runners: QuerySet[AgentSession]
) -> None:
    """The entries the fleet closed landed, or were rejected for a conflict or a lost
    lease, never by the check; main moved only to commits they landed, each commit on
    it with a ``Projektor-Landing`` trailer is its entry's, and each passes the check."""
    entries = Landing.objects.filter(workspace=demo, session__in=runners)
    landed = {entry.landed_commit for entry in entries.filter(state=Landing.State.LANDED)}
    assert landed
    assert not entries.filter(reason=Landing.Reason.CHECK_FAILED).exists()
    assert git(repo, "rev-parse", "main").strip() in landed
    log = git(repo, "log", "--format=%H %(trailers:key=Projektor-Landing,valueonly)", "main")
    trailed = dict(line.split() for line in log.splitlines() if len(line.split()) == 2)
    assert trailed and set(trailed) <= landed
    for sha, number in trailed.items():
        assert entries.get(pk=int(number)).landed_commit == sha
    scratch = repo.parent / "checking"
    git(repo, "worktree", "add", "-q", "--detach", str(scratch), "main")
    try:
        for sha in sorted(landed):
            git(scratch, "checkout", "-q", "--detach", sha)
            checked = subprocess.run(
                [sys.executable, CHECK], cwd=scratch, capture_output=True, text=True, check=False
            )
            assert checked.returncode == 0, (sha, checked.stdout)
    finally:
        git(repo, "worktree", "remove", "--force", str(scratch))


def logs_of(place: Path) -> str:
    return "".join(log.read_text(errors="replace") for log in (place / "logs").glob("*.log"))


def handed_in_by_a_runner(demo: Workspace, since: datetime) -> Issue:
    """The first issue moved to review or done since ``since`` whose report names a
    runner's branch, once there is one."""

    def found() -> Issue | None:
        moved = Issue.objects.filter(
            workspace=demo,
            status__in=[Issue.Status.IN_REVIEW, Issue.Status.DONE],
            updated_at__gte=since,
        )
        return next(
            (
                issue
                for issue in moved.order_by("pk")
                if "Branch: projektor/" in (issue.report or {}).get("summary", "")
            ),
            None,
        )

    wait_until(found, "an issue a runner integrated and handed in")
    issue = found()
    assert issue is not None
    return issue


def the_readme_agent_tour(banner: str, url: str, tmp_path: Path) -> Issue:
    """README "Five minutes as an agent": the banner's ``shell`` line pasted, then the
    tour's calls as printed; the issue it worked."""
    [shell] = [line.split(":", 1)[1] for line in banner.splitlines() if "shell" in line]
    [tour] = shell_blocks("Five minutes as an agent")[:1]
    done = run_shell(shell + "\n" + tour, url=url, cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert '"code"' not in done.stdout, done.stdout  # no refusal on the way
    issue_id = int(re.search(r"ISSUE=(\d+)", shell)[1])  # type: ignore[index]
    return Issue.objects.get(pk=issue_id)


def test_the_command_needs_the_demo_and_a_server(db: None, demo_dir: Path) -> None:
    place = demo_dir
    with pytest.raises(CommandError, match="seed_demo"):
        call_command("demo_fleet", stdout=StringIO())
    call_command("seed_demo", "--agents", "4", "--days", "1", stdout=StringIO())
    with pytest.raises(CommandError, match="healthz"):
        call_command(
            "demo_fleet", "--url", "http://127.0.0.1:9", "--wait", "0.5", stdout=StringIO()
        )
    # It revoked the key it minted, and made the repository for the next run.
    assert not ApiKey.objects.filter(name=access.FLEET_KEY_NAME, revoked_at__isnull=True).exists()
    assert (place / "repo" / ".git").exists()
    # Every open issue of the fleet's projects is a filesystem issue its plan knows (the
    # tour's project is a person's: test_seed_demo).
    open_issues = Issue.objects.filter(
        workspace__slug=world.SLUG,
        project__key__in=world.PROJECTS_BY_KEY,
        status__in=[Issue.Status.BACKLOG, Issue.Status.TODO, Issue.Status.IN_PROGRESS],
    )
    assert open_issues.exists()
    assert not open_issues.filter(requires_filesystem=False).exists()
    assert settings.PROJEKTOR_STALL_AFTER_SECONDS  # the plan's idles are paced by it
    assert os.path.exists(place / "plan.json")
