"""Fixtures of the coordination tests, and the helpers that read what they assert on:
worktrees, agents and projects on both sides of the workspace line; fence scenarios
(a holder that lost its lease or its lock); runs in each end state; file claims; a
schema editor for the migrations' own functions."""

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from coordination.models import (
    Agent,
    AgentSession,
    ClaimConflict,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    Project,
    ReleaseReason,
    Run,
    Workspace,
    Worktree,
    WorktreeLock,
)
from coordination.services import agents, file_claims, leases, runs
from tests.api_helpers import post
from tests.conftest import expire

# --- worktrees, agents and projects, ours and theirs ----------------------------------


@pytest.fixture
def tree(workspace) -> Worktree:
    return Worktree.objects.create(workspace=workspace, slug="main", name="Main")


@pytest.fixture
def ours(tree: Worktree) -> Worktree:
    """Our workspace's ``main``, beside ``theirs`` of the same slug."""
    return tree


@pytest.fixture
def theirs(other_workspace):
    # The same slug as ours: lookups by slug must stay inside the caller's workspace.
    return Worktree.objects.create(workspace=other_workspace, slug="main", name="Their main")


@pytest.fixture
def their_only(other_workspace):
    """A slug that exists only in the other workspace."""
    return Worktree.objects.create(workspace=other_workspace, slug="elsewhere", name="Elsewhere")


@pytest.fixture
def agent(workspace):
    return Agent.objects.create(workspace=workspace, name="coder-1", role="Engineer")


@pytest.fixture
def their_agent(other_workspace):
    return Agent.objects.create(workspace=other_workspace, name="spy", role="Engineer")


@pytest.fixture
def their_project(other_workspace):
    return Project.objects.create(workspace=other_workspace, key="theirs", name="Theirs")


def snapshot(obj, *fields):
    obj = type(obj).objects.get(pk=obj.pk)
    return {field: getattr(obj, f"{field}_id") for field in fields}


# --- fences: a holder that lost what it held ------------------------------------------


@pytest.fixture
def roomy(project: Project) -> Project:
    """Enough WIP room that the cap never gets in a fence test's way."""
    project.agent_wip_limit = 100
    project.save()
    return project


def claim_lease(workspace, issue, session) -> IssueLease:
    return leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk).lease


def dispatch_run(workspace, session, issue) -> Run:
    return runs.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=issue.pk)


def lock_of(run) -> WorktreeLock:
    return WorktreeLock.objects.get(run_id=run.pk)


def lease_fences(issue) -> list[int]:
    return list(
        IssueLease.objects.filter(issue=issue).order_by("id").values_list("fence", flat=True)
    )


def lock_fences(worktree) -> list[int]:
    rows = WorktreeLock.objects.filter(worktree=worktree).order_by("id")
    return list(rows.values_list("fence", flat=True))


def state() -> dict[str, Any]:
    """Everything a refused call must leave as it was."""
    return {
        "leases": list(
            IssueLease.objects.order_by("id").values_list(
                "id", "session_id", "released_at", "release_reason", "fence"
            )
        ),
        "claims": list(
            FileClaim.objects.order_by("id").values_list(
                "id", "path", "issue_id", "session_id", "released_at", "release_reason"
            )
        ),
        "conflicts": ClaimConflict.objects.count(),
        "messages": Message.objects.count(),
        "runs": list(Run.objects.order_by("id").values_list("id", "status", "finished_at")),
        "locks": list(
            WorktreeLock.objects.order_by("id").values_list(
                "id", "released_at", "release_reason", "fence"
            )
        ),
        "issues": list(Issue.objects.order_by("id").values_list("id", "status", "report")),
        "sessions": list(
            AgentSession.objects.order_by("id").values_list("id", "status", "ended_at")
        ),
    }


@pytest.fixture
def lost_lease(workspace, issue, make_session, roomy):
    """``old`` held the issue with fence 1, paused past the TTL and ``new`` reclaimed
    it (fence 2); ``old`` has woken up and heartbeats again."""
    old, new = make_session("old"), make_session("new")
    first = claim_lease(workspace, issue, old)
    expire(old)
    second = claim_lease(workspace, issue, new)
    agents.heartbeat_session(workspace=workspace, session_id=old.pk)
    assert (first.fence, second.fence) == (1, 2)
    return old, first, new, second


@pytest.fixture
def lost_lock(workspace, make_issue, make_session, tree, roomy):
    """``old`` ran on the worktree (lock fence 1), paused past the TTL, and ``new``
    dispatched onto the same worktree, reclaiming the lock (fence 2)."""
    old, new = make_session("old"), make_session("new")
    old_run = dispatch_run(workspace, old, make_issue(worktree=tree))
    expire(old)
    new_run = dispatch_run(workspace, new, make_issue(worktree=tree))
    agents.heartbeat_session(workspace=workspace, session_id=old.pk)
    assert (lock_of(old_run).fence, lock_of(new_run).fence) == (1, 2)
    assert lock_of(old_run).release_reason == ReleaseReason.EXPIRED
    return old_run, new_run


# --- runs -----------------------------------------------------------------------------


@pytest.fixture
def three_runs(api, workspace, make_issue, make_session, tree):
    """A running run, a cancelled (busy) run and a skipped (unresolved) run."""
    holder, waiter, unbound = make_session("holder"), make_session("waiter"), make_session("u")
    running = runs.dispatch_run(
        workspace=workspace, session_id=holder.pk, issue_id=make_issue(worktree=tree).pk
    )
    busy = post(api, "/runs/", {"session": waiter.pk, "issue": make_issue(worktree=tree).pk})
    unbound_issue = make_issue(requires_filesystem=True)
    skipped = post(api, "/runs/", {"session": unbound.pk, "issue": unbound_issue.pk})
    return {
        "running": running.pk,
        "cancelled": busy.json()["run"],
        "skipped": skipped.json()["run"],
    }


# --- file claims ----------------------------------------------------------------------


# Paths no claim may name, one of each kind (a path over 1024 bytes aside).
INVALID_PATHS = [
    "/abs.py",
    "../up.py",
    "a/../b.py",
    "nul\x00.py",
    "line\nbreak.py",
    "back\\slash.py",
    "",
    "./",
]


def claim_paths(workspace: Workspace, issue: Any, paths: list[str], session: Any = None) -> None:
    file_claims.claim_files(
        workspace=workspace,
        issue_id=issue.pk,
        paths=paths,
        session_id=session.pk if session is not None else None,
    )


def held(**filters):
    """{path: issue id} of every unreleased claim."""
    rows = FileClaim.objects.filter(released_at__isnull=True, **filters)
    return dict(rows.values_list("path", "issue_id"))


# --- a database other threads and processes can share ------------------------------


@pytest.fixture
def file_database(tmp_path: Path) -> Iterator[Path | None]:
    """SQLite's test database lives in this process's memory, with a shared cache
    where a second writer fails at once ("database table is locked") instead of
    queuing as connections to a file do. So on SQLite new connections (other
    threads') open a file copy of it, made now, which is yielded for other processes
    too; the test's own connection stays on the in-memory one, so a test that uses
    this fixture reads and writes through other threads. On PostgreSQL: nothing to
    do (None). Set up what the test needs before this fixture."""
    if connection.vendor != "sqlite":
        yield None
        return
    settings_dict = connection.settings_dict
    name = settings_dict["NAME"]
    path = tmp_path / "shared.sqlite3"
    connection.ensure_connection()
    copy = sqlite3.connect(path)
    connection.connection.backup(copy)
    copy.close()
    settings_dict["NAME"] = str(path)
    try:
        yield path
    finally:
        settings_dict["NAME"] = name


# --- migrations -----------------------------------------------------------------------


class Editor:
    """Enough of a schema editor for the migration's functions, inside a test
    transaction (SQLite's real one refuses to open inside a transaction)."""

    def __init__(self):
        self.connection = connection

    def execute(self, sql, params=None):
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


@pytest.fixture
def editor() -> Editor:
    return Editor()
