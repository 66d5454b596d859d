"""The bench workspace and its data, made in the command's process.

A fresh workspace (``bench-<hex>``) with its own API key, one project whose WIP cap
admits every agent, and per agent an issue for each of the lease, files and
contended scenarios. The volumes the list and growth scenarios need are bulk-loaded
(see ``bulk``) into the same workspace, which is deleted at the end through
``logs.delete_workspace``, the one door of the append-only logs.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from benchmarks.bulk import (
    HISTORY_DAYS,
    load_history_postgres,
    load_history_sqlite,
    load_stale_sessions_postgres,
    load_stale_sessions_sqlite,
    postgres,
    source_tree,
)
from benchmarks.workload import CONTENDED_PICK
from coordination.liveness import DbNow
from coordination.models import (
    Agent,
    AgentSession,
    ApiKey,
    ClaimConflict,
    FileClaim,
    Issue,
    IssueLease,
    Project,
    WipCapDenial,
    Workspace,
    hash_api_key,
)
from coordination.services import bulk, logs

PATHS_PER_AGENT = 10
CONTENDED_POOL_SIZE = 50
# The directories scenario's shared tree: packages × modules × files.
TREE_PACKAGES, TREE_MODULES, TREE_FILES = 8, 8, 8
FLEET_AGENTS = 1_000  # identities behind the loaded sessions and history


@dataclass(frozen=True)
class Volumes:
    """What the list and growth scenarios load; ``--quick`` divides it by 100."""

    stale_sessions: int = 100_000  # half ended, half active with an old heartbeat
    live_sessions: int = 1_000
    ready_issues: int = 10_000
    history_claims: int = 1_000_000  # released
    history_conflicts: int = 200_000
    history_paths: int = 20_000
    active_claims: int = 10_000  # unreleased, held by live sessions
    active_sessions: int = 100
    active_directories: int = 1_000  # unreleased directory claims, by the same sessions
    fleet_agents: int = FLEET_AGENTS

    def scaled_down(self, divisor: int) -> Volumes:
        return replace(
            self,
            **{item.name: max(1, getattr(self, item.name) // divisor) for item in fields(self)},
        )


@dataclass
class BenchWorkspace:
    workspace: Workspace
    raw_key: str
    key_hash: str
    project: Project
    agents: list[Agent]  # the bench's agents, one per client process
    lease_issues: list[int]
    files_issues: list[int]
    contended_issues: list[int]
    directories_issues: list[int]
    counter_issues: list[int]  # the statement counter's own: lease, files, a rival's
    fleet_agents: list[int]  # ids of the identities behind loaded rows
    live_session_ids: list[int]
    active_session_ids: list[int]
    active_issue_ids: list[int] = field(default_factory=list)

    @property
    def pk(self) -> int:
        return self.workspace.pk


def own_paths(index: int) -> tuple[str, ...]:
    """Agent ``index``'s paths in ``files``: nobody else claims them."""
    return tuple(f"src/agents/agent{index:03d}/module{n}.py" for n in range(PATHS_PER_AGENT))


def counter_paths() -> tuple[str, ...]:
    """The statement counter's paths (``statements``): nobody else claims them."""
    return tuple(f"src/counter/module{n}.py" for n in range(PATHS_PER_AGENT))


def contended_pool() -> tuple[str, ...]:
    """The shared paths every agent of ``contended`` draws from."""
    assert CONTENDED_POOL_SIZE >= CONTENDED_PICK
    return tuple(f"src/shared/hot{n:02d}.py" for n in range(CONTENDED_POOL_SIZE))


def shared_tree() -> tuple[str, ...]:
    """The tree every agent of ``directories`` claims in: ``tree/`` with packages of
    modules of files, and its directories (ending in ``/``)."""
    paths: list[str] = []
    for package in range(TREE_PACKAGES):
        paths.append(f"tree/pkg{package}/")
        for module in range(TREE_MODULES):
            paths.append(f"tree/pkg{package}/mod{module}/")
            paths += [f"tree/pkg{package}/mod{module}/f{n}.py" for n in range(TREE_FILES)]
    return tuple(paths)


def create_workspace(agent_count: int) -> BenchWorkspace:
    """The workspace, its key, its project, the agents and their issues."""
    workspace = Workspace.objects.create(slug=f"bench-{uuid.uuid4().hex[:8]}", name="Bench")
    _, raw_key = ApiKey.issue(workspace, "bench")
    # Every agent may hold a lease at once, and the statement counter one more.
    project = Project.objects.create(
        workspace=workspace, key="bench", name="Bench", agent_wip_limit=agent_count + 1
    )
    agents = Agent.objects.bulk_create(
        Agent(workspace=workspace, name=f"bench-agent-{index:03d}", role="coder")
        for index in range(agent_count)
    )

    def issues(label: str, count: int) -> list[int]:
        made = Issue.objects.bulk_create(
            Issue(
                workspace=workspace,
                project=project,
                title=f"{label} {n}",
                description=f"Bench {label} work for agent {n}. Done when it is measured.",
                status=Issue.Status.TODO,
                priority=Issue.Priority.MEDIUM,
            )
            for n in range(count)
        )
        return [issue.pk for issue in made]

    return BenchWorkspace(
        workspace=workspace,
        raw_key=raw_key,
        key_hash=hash_api_key(raw_key),
        project=project,
        agents=agents,
        lease_issues=issues("Lease", agent_count),
        files_issues=issues("Files", agent_count),
        contended_issues=issues("Contended", agent_count),
        directories_issues=issues("Directories", agent_count),
        counter_issues=issues("Counted", 3),
        fleet_agents=[],
        live_session_ids=[],
        active_session_ids=[],
    )


def drop(bench: BenchWorkspace) -> None:
    """Delete the workspace and everything in it, as a bulk load: the claims, most of
    the rows and no log, go first in one plain DELETE by workspace; the cascade does
    the rest."""
    with bulk.loading(bench.pk), connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {FileClaim._meta.db_table} WHERE workspace_id = %s", [bench.pk]
        )
        logs.delete_workspace(bench.workspace)


# --- helpers ------------------------------------------------------------------------


def analyze(*models: Any) -> None:
    """Refresh PostgreSQL's statistics after a bulk load, as autovacuum soon would."""
    if not postgres():
        return
    with connection.cursor() as cursor:
        for model in models:
            cursor.execute(f"ANALYZE {model._meta.db_table}")


def settle() -> None:
    """Before each run on PostgreSQL: VACUUM ANALYZE the tables the runs churn, as
    autovacuum does in the background (it may be off, as on a test server), so that a
    run starts from fresh statistics instead of the previous runs' dead rows."""
    if not postgres():
        return
    tables = [
        model._meta.db_table
        for model in (FileClaim, IssueLease, AgentSession, Issue, ClaimConflict, WipCapDenial)
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {', '.join(tables)}")


def ensure_fleet(bench: BenchWorkspace, count: int) -> list[int]:
    """The identities behind loaded sessions and history (made once)."""
    if not bench.fleet_agents:
        made = Agent.objects.bulk_create(
            Agent(workspace=bench.workspace, name=f"fleet-{n:04d}", role="coder")
            for n in range(count)
        )
        bench.fleet_agents = [agent.pk for agent in made]
    return bench.fleet_agents


# --- live: sessions -------------------------------------------------------------------


def load_sessions(bench: BenchWorkspace, volumes: Volumes) -> None:
    """``stale_sessions`` past sessions (every other one ended, the rest active with a
    heartbeat 16 h to 90 days old) and ``live_sessions`` live ones."""
    agents = ensure_fleet(bench, volumes.fleet_agents)
    if postgres():
        load_stale_sessions_postgres(bench, volumes, agents)
    else:
        load_stale_sessions_sqlite(bench, volumes, agents)
    live = AgentSession.objects.bulk_create(
        AgentSession(workspace=bench.workspace, agent_id=agents[n % len(agents)])
        for n in range(volumes.live_sessions)
    )
    bench.live_session_ids = [session.pk for session in live]
    analyze(AgentSession)


def heartbeat(session_ids: list[int]) -> None:
    """Make these sessions live now, by the database's clock, as a heartbeat does."""
    AgentSession.objects.filter(pk__in=session_ids).update(last_heartbeat_at=DbNow())


# --- ready: issues --------------------------------------------------------------------

# A backlog as it looks in use: (status, has a description, share).
ISSUE_MIX = (
    (Issue.Status.TODO, True, 0.40),
    (Issue.Status.TODO, False, 0.15),
    (Issue.Status.BACKLOG, True, 0.10),
    (Issue.Status.BACKLOG, False, 0.10),
    (Issue.Status.IN_PROGRESS, True, 0.10),
    (Issue.Status.IN_REVIEW, True, 0.05),
    (Issue.Status.DONE, True, 0.07),
    (Issue.Status.CANCELLED, True, 0.03),
)
READY_PROJECTS = ("web", "api", "infra", "data")


def load_ready_issues(bench: BenchWorkspace, volumes: Volumes) -> None:
    """``ready_issues`` issues over four projects in the ``ISSUE_MIX``, priorities of
    every level, created over the last 90 days."""
    projects = Project.objects.bulk_create(
        Project(workspace=bench.workspace, key=key, name=key.title()) for key in READY_PROJECTS
    )
    rng = random.Random(2)
    now = timezone.now()
    kinds = [(status, described) for status, described, _ in ISSUE_MIX]
    weights = [share for _, _, share in ISSUE_MIX]

    def issue(n: int) -> Issue:
        status, described = rng.choices(kinds, weights)[0]
        return Issue(
            workspace=bench.workspace,
            project=projects[n % len(projects)],
            title=f"Issue {n}: tidy up module {n % 97}",
            description=f"Done when module {n % 97} passes its checks." if described else "",
            status=status,
            priority=rng.choice(Issue.Priority.values),
            created_at=now - timedelta(days=rng.random() * HISTORY_DAYS),
        )

    Issue.objects.bulk_create((issue(n) for n in range(volumes.ready_issues)), batch_size=2_000)
    analyze(Issue)


# --- growth: history and active claims ----------------------------------------------


def load_history(bench: BenchWorkspace, volumes: Volumes) -> None:
    """``history_claims`` released claims and ``history_conflicts`` conflict rows
    over a tree of ``history_paths`` paths (a few hot ones: a cubed uniform draw),
    at times spread over 90 days, against every issue of the workspace."""
    agents = ensure_fleet(bench, volumes.fleet_agents)
    issues = list(Issue.objects.filter(workspace=bench.workspace).values_list("pk", flat=True))
    # A bulk load, as an import would be: what triggers derive from the rows is
    # rebuilt once after, not row by row (a few minutes less on either database).
    with bulk.loading(bench.pk):
        if postgres():
            load_history_postgres(bench, volumes, agents, issues)
        else:
            load_history_sqlite(bench, volumes, agents, issues, source_tree(volumes.history_paths))
    analyze(FileClaim, ClaimConflict)


def load_active_claims(bench: BenchWorkspace, volumes: Volumes) -> None:
    """``active_claims`` unreleased claims on paths of their own, held by
    ``active_sessions`` sessions (each on its own issue). They are live only once
    ``heartbeat(bench.active_session_ids)`` has run."""
    agents = ensure_fleet(bench, volumes.fleet_agents)
    count = volumes.active_sessions
    sessions = AgentSession.objects.bulk_create(
        AgentSession(workspace=bench.workspace, agent_id=agents[n % len(agents)])
        for n in range(count)
    )
    issues = Issue.objects.bulk_create(
        Issue(
            workspace=bench.workspace,
            project=bench.project,
            title=f"Active work {n}",
            description="Held while the growth run measures.",
            status=Issue.Status.IN_PROGRESS,
        )
        for n in range(count)
    )
    per_session = max(1, volumes.active_claims // count)
    FileClaim.objects.bulk_create(
        (
            FileClaim(
                workspace=bench.workspace,
                issue=issues[n],
                session=sessions[n],
                agent_id=sessions[n].agent_id,
                path=f"services/active{n:03d}/part{part:03d}.py",
            )
            for n in range(count)
            for part in range(per_session)
        ),
        batch_size=2_000,
    )
    bench.active_session_ids = [session.pk for session in sessions]
    bench.active_issue_ids = [issue.pk for issue in issues]
    analyze(FileClaim, AgentSession)


def load_active_directories(bench: BenchWorkspace, volumes: Volumes) -> None:
    """``active_directories`` unreleased directory claims beside the shared tree, in a
    top directory of their own (``tree/held/dNNNN/``), held by the sessions (and on the
    issues) of ``load_active_claims``. A claim in the shared tree range-scans next to
    them, and looks ``tree/`` up among them by equality."""
    holders = list(zip(bench.active_session_ids, bench.active_issue_ids, strict=True))
    agents = dict(
        AgentSession.objects.filter(pk__in=bench.active_session_ids).values_list("pk", "agent_id")
    )
    FileClaim.objects.bulk_create(
        (
            FileClaim(
                workspace=bench.workspace,
                issue_id=holders[n % len(holders)][1],
                session_id=holders[n % len(holders)][0],
                agent_id=agents[holders[n % len(holders)][0]],
                path=f"tree/held/d{n:04d}/",
            )
            for n in range(volumes.active_directories)
        ),
        batch_size=2_000,
    )
    analyze(FileClaim)
