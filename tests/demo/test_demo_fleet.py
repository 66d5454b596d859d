"""``demo_fleet`` as ``make run`` runs it: a process beside a live server (gunicorn, the
suite's harness), on the demo seeded in the test database, its runners real
``projektor run --loop`` processes with the scripted agent on a demo repository made
in a temporary folder. Their work lands on the repository's ``main`` and is handed in;
SIGTERM stops the command and every process it started. Every wait is on a condition."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from benchmarks import server as harness
from coordination.models import AgentSession, ApiKey, Issue, Run, Workspace
from coordination.services.graph import expected_paths
from demo import access, world
from demo.fleet.place import files_for

pytestmark = pytest.mark.django_db(transaction=True)

PATIENCE = 120.0  # seconds a condition may take on a loaded machine before the test fails
ROOT = Path(__file__).resolve().parents[2]


def wait_until(condition: Callable[[], object], what: str, patience: float = PATIENCE) -> None:
    deadline = time.monotonic() + patience
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {patience:g} s for {what}")
        time.sleep(0.2)


@pytest.fixture
def demo() -> Workspace:
    call_command("seed_demo", "--agents", "4", "--days", "1", stdout=StringIO())
    return Workspace.objects.get(slug=world.SLUG)


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROJEKTOR_DEMO_DIR", str(tmp_path / "demo"))
    return tmp_path / "demo"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def processes_under(folder: Path) -> list[str]:
    """The live processes whose command line names ``folder`` (the runners and their
    agents name the demo's folders)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(folder) in text and state not in ("Z", "X"):
            found.append(f"{cmdline.parent.name}: {text}")
    return found


class FleetProcess:
    """``manage.py demo_fleet`` as a process of its own, on the test database."""

    def __init__(self, url: str, place: Path, env: dict[str, str], *args: str) -> None:
        self.log = place.parent / "fleet.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "demo_fleet", "--url", url, "-v2", *args],
                cwd=ROOT,
                env={**env, "PROJEKTOR_DEMO_DIR": str(place)},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(PATIENCE)


@pytest.fixture
def live(demo: Workspace, tmp_path: Path) -> Iterator[tuple[harness.Server, dict[str, str]]]:
    env = harness.environment_on_this_database({"SECRET_KEY": "demo-fleet-only", "REDIS_URL": None})
    with harness.gunicorn(
        env=env, workers=2, threads=8, log_path=tmp_path / "server.log"
    ) as server:
        yield server, env


def url(server: harness.Server) -> str:
    return f"http://{server.host}:{server.port}"


def test_runners_land_real_work_on_the_demo_repository_and_stop_with_the_fleet(
    demo: Workspace, live: tuple[harness.Server, dict[str, str]], place: Path
) -> None:
    server, env = live
    began = timezone.now()
    fleet = FleetProcess(url(server), place, env, "--agents", "3", "--work", "1,3")
    repo = place / "repo"
    try:
        wait_until(lambda: "at work on" in fleet.output(), "the fleet at work")
        first = git(repo, "rev-list", "--max-parents=0", "main").strip()

        def handed_in() -> Issue | None:
            """The first issue in review or done whose report names a runner's branch."""
            done = Issue.objects.filter(
                workspace=demo,
                status__in=[Issue.Status.IN_REVIEW, Issue.Status.DONE],
                updated_at__gte=began,
            )
            return next(
                (
                    issue
                    for issue in done.order_by("pk")
                    if "Branch: projektor/" in (issue.report or {}).get("summary", "")
                ),
                None,
            )

        wait_until(handed_in, "an issue a runner integrated and handed in")
        issue = handed_in()
        assert issue is not None
        # Its work is on main: the scripted agent's commit (its trailer names the issue),
        # touching files the issue names.
        commit = git(
            repo, "log", "--format=%H", f"--grep=^Workbench-Issue: {issue.pk}$", f"{first}..main"
        ).split()[0]
        touched = set(git(repo, "show", "--name-only", "--format=", commit).split())
        named = {file for path in expected_paths(issue) for file in files_for(path)}
        assert touched & named, (touched, named)
        # Its run was on the agent's own worktree, a checkout of the demo repository.
        run = Run.objects.filter(
            issue=issue, status=Run.Status.SUCCEEDED, worktree__slug__in=world.AGENT_NAMES
        ).first()
        assert run is not None and run.worktree is not None
        assert (place / "worktrees" / run.worktree.slug / ".git").exists()
    finally:
        status = fleet.stop()
    text = fleet.output()
    assert status == 0, text
    assert "3 runners and a reviewer at work" in text
    assert " 0 5xx" in text.strip().splitlines()[-1], text
    assert processes_under(place) == []
    # Stopped, no runner's session is left live, and the fleet's key is revoked.
    runners = AgentSession.objects.filter(workspace=demo, started_at__gte=began)
    assert runners.exists() and not runners.live().exists()
    keys = ApiKey.objects.filter(workspace=demo, name=access.FLEET_KEY_NAME)
    assert keys.count() == 1 and keys.get().revoked_at is not None
    # The repository is kept for the next run, its main as the fleet left it.
    assert git(repo, "rev-list", "--count", "main").strip() != "1"


def test_the_command_needs_the_demo_and_a_server(db: None, place: Path) -> None:
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
    # Every open issue of the demo is a filesystem issue its plan knows.
    open_issues = Issue.objects.filter(
        workspace__slug=world.SLUG,
        status__in=[Issue.Status.BACKLOG, Issue.Status.TODO, Issue.Status.IN_PROGRESS],
    )
    assert open_issues.exists()
    assert not open_issues.filter(requires_filesystem=False).exists()
    assert settings.PROJEKTOR_STALL_AFTER_SECONDS  # the plan's idles are paced by it
    assert os.path.exists(place / "plan.json")
