"""The live demo's place and plan: the demo repository beside the database holds the
files the demo's issues name, is kept across runs (new files added in a commit of
their own), and every open issue gets a plan entry the scripted agent can work."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from coordination.models import Issue, Workspace
from coordination.services.graph import expected_paths
from demo import world
from demo.fleet import place as places
from demo.fleet.plan import OPEN, DemoPlan, Pacing, entry, prepare
from demo.fleet.runners import RunnerSpec, runner_command, tidy, verify_command
from demo.workbench.agent import find


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_the_place_is_beside_the_sqlite_file_unless_named(settings, monkeypatch, tmp_path):
    monkeypatch.delenv("PROJEKTOR_DEMO_DIR", raising=False)
    database = {**settings.DATABASES["default"], "ENGINE": "django.db.backends.sqlite3"}
    settings.DATABASES = {"default": {**database, "NAME": str(tmp_path / "db.sqlite3")}}
    assert places.demo_place().home == tmp_path / ".db.sqlite3-demo"
    monkeypatch.setenv("PROJEKTOR_DEMO_DIR", str(tmp_path / "elsewhere"))
    assert places.demo_place().home == tmp_path / "elsewhere"


def test_the_repository_is_made_once_with_the_named_files_and_kept(tmp_path):
    place = places.Place(tmp_path / "demo")
    assert places.ensure_repository(place, ["api/feature/models.py", "api/billing/"]) is True
    files = set(git(place.repo, "ls-tree", "-r", "--name-only", "main").split())
    assert set(world.SOURCE_TREE) <= files
    assert {"api/feature/models.py", "api/billing/README.md", "api/billing/__init__.py"} <= files
    assert git(place.repo, "rev-list", "--count", "main").strip() == "1"
    # Each hot spot has the marker the scripted agent adds its entries above.
    for path, markers in places.HOT.items():
        assert markers[0] in (place.repo / path).read_text().splitlines(), path
    # Kept: the same files again change nothing; a new one is added on top of main.
    assert places.ensure_repository(place, ["api/feature/models.py"]) is False
    assert git(place.repo, "rev-list", "--count", "main").strip() == "1"
    assert places.ensure_repository(place, ["web/new/page.ts"]) is False
    assert git(place.repo, "rev-list", "--count", "main").strip() == "2"
    assert git(place.repo, "show", "--name-only", "--format=", "main").split() == [
        "web/new/page.ts"
    ]
    assert (place.repo / "web/new/page.ts").exists()  # the checkout of main follows
    assert git(place.repo, "status", "--porcelain") == ""


def test_an_entry_is_the_same_each_run_and_an_idle_one_outlasts_the_threshold():
    pacing = Pacing(seconds=(5, 10), idle_chance=0.0, crash_chance=0.0, stall_after=90)
    first = entry(7, "Fix it", "api", ["src/api/auth.py", "src/api/urls.py"], pacing)
    assert first == entry(7, "Fix it", "api", ["src/api/auth.py", "src/api/urls.py"], pacing)
    assert first.id == first.key == 7 and first.crash is None
    assert first.paths == ["src/api/auth.py", "src/api/urls.py"]
    assert 5 <= first.work_seconds <= 10
    idle = entry(7, "Fix it", "api", ["src/api/auth.py", "src/api/urls.py"],
                 Pacing(idle_chance=1.0, stall_after=90))  # fmt: skip
    # The agent rests work_seconds / (edits + 1) before each edit and before its commit.
    rest = idle.work_seconds / (len(idle.paths) + len(idle.extra) + 1)
    assert rest > 90


@pytest.mark.django_db
def test_every_open_issue_of_the_fleets_projects_is_planned_as_a_filesystem_issue(tmp_path):
    """The tour's project is a person's: left out (tests/demo/test_seed_demo.py)."""
    call_command("seed_demo", "--agents", "4", "--days", "1", stdout=StringIO())
    workspace = Workspace.objects.get(slug=world.SLUG)
    plan = DemoPlan(tmp_path / "plan.json", Pacing(), ttl=120)
    count = prepare(workspace, plan)
    plan.save()
    open_issues = Issue.objects.filter(
        workspace=workspace, status__in=OPEN, project__key__in=world.PROJECTS_BY_KEY
    )
    assert count == open_issues.count() > 0
    assert not open_issues.filter(requires_filesystem=False).exists()
    assert not open_issues.filter(worktree__isnull=False).exists()
    saved = json.loads((tmp_path / "plan.json").read_text())
    place = places.Place(tmp_path / "demo")
    places.ensure_repository(place, plan.files())
    for issue in open_issues:
        planned = find(saved, issue.pk)  # as the scripted agent looks it up
        assert planned is not None and planned["title"] == issue.title
        assert expected_paths(issue), issue
        for path in planned["paths"] + planned["extra"] + planned["alternatives"]:
            assert (place.repo / path).is_file(), path


def test_a_worktree_left_dirty_or_mid_rebase_is_tidied_for_its_runner(tmp_path):
    place = places.Place(tmp_path / "demo")
    places.ensure_repository(place, [])
    worktree = place.worktrees / "atlas"
    git(place.repo, "worktree", "add", "-q", "-b", "projektor/1-fix", str(worktree), "main")
    said: list[str] = []
    tidy(worktree, said.append)
    assert said == [] and git(worktree, "rev-list", "--count", "main..HEAD").strip() == "0"
    # A rebase stopped on a conflict, and edits besides: a killed runner's leftovers.
    (worktree / "README.md").write_text("the branch's line\n")
    git(worktree, "commit", "-qam", "The branch's change")
    (place.repo / "README.md").write_text("main's line\n")
    git(place.repo, "commit", "-qam", "Main's change")
    rebase = subprocess.run(["git", "rebase", "main"], cwd=worktree, capture_output=True)
    assert rebase.returncode != 0  # stopped on the conflict
    tidy(worktree, said.append)
    assert git(worktree, "status", "--porcelain") == ""
    assert git(worktree, "log", "-1", "--format=%s").strip() == "The branch's change"
    (worktree / "docs/faq.md").write_text("an edit\n")
    (worktree / "new.txt").write_text("a new file\n")
    tidy(worktree, said.append)
    assert git(worktree, "status", "--porcelain") == ""
    assert git(worktree, "log", "-1", "--format=%s").strip() == (
        "Unfinished work left when the demo fleet last stopped"
    )
    assert git(worktree, "branch", "--show-current").strip() == "projektor/1-fix"
    assert len(said) == 1


def check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, places.CHECK], cwd=root, capture_output=True, text=True, check=False
    )


def test_the_repository_holds_the_check_the_runners_land_with(tmp_path):
    """check.py, in the first commit, passes on the demo's files and fails on a file
    that does not compile or holds a conflict marker; a repository made before there
    was a check is given it. The runners queue their work with it as the landing check."""
    place = places.Place(tmp_path / "demo")
    places.ensure_repository(place, ["api/billing/"])
    assert places.CHECK in git(place.repo, "ls-tree", "--name-only", "main").split()
    passed = check(place.repo)
    assert passed.returncode == 0 and ", 0 failures" in passed.stdout, passed.stdout
    (place.repo / "README.md").write_text("<<<<<<< HEAD\nours\n=======\ntheirs\n")
    (place.repo / "src/api/urls.py").write_text("def broken(:\n")
    failed = check(place.repo)
    assert failed.returncode == 1
    assert "FAIL README.md:1: a conflict marker" in failed.stdout
    assert "FAIL README.md:3: a conflict marker" in failed.stdout
    assert "FAIL src/api/urls.py:1:" in failed.stdout
    # An older demo's repository, without a check: given it in a commit of its own.
    older = places.Place(tmp_path / "older")
    older.repo.mkdir(parents=True)
    git(older.repo, "init", "-q", "-b", "main")
    (older.repo / "README.md").write_text("an older demo\n")
    git(older.repo, "add", "README.md")
    git(older.repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "Older")
    assert places.ensure_repository(older, []) is False
    assert places.CHECK in git(older.repo, "show", "--name-only", "--format=", "main").split()
    assert check(older.repo).returncode == 0
    # The runners: landed through the queue, that check run with this interpreter.
    command = runner_command(RunnerSpec(url="http://x", key="k", place=place), "api")
    assert command[command.index("--verify") + 1] == verify_command()
    assert shlex.split(verify_command()) == [sys.executable, places.CHECK]
    assert {"--integrate", "--queue"} <= set(command[: command.index("--")])
    assert command[command.index("--batch-max") + 1] == "4"
