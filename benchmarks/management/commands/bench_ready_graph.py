"""The ready queue over the work graph (invariant 16 (the work graph)), in-process, on the
configured database: 10,000 issues, 20,000 ``blocks`` links (acyclic: each from an older issue to
a newer one), two expected paths per issue (a file and a directory), and 2,000 live
claims held by 100 live sessions, some of them on the queue's expected paths.

For each form of the queue (the plain order, collision-free first, ``free=true``) it
prints the median and p95 of its first page (the count and the page, as the API pages
it) and how many statements that took; then the database's own work for the count and
the page statements, which the machine's load does not move: PostgreSQL's buffer hits
(EXPLAIN ANALYZE), SQLite's virtual-machine steps (counted by its progress handler). The
data lives in a throw-away workspace.
"""

import random
import statistics
import time
import uuid
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from benchmarks.load import analyze
from coordination.db import sql
from coordination.db.rows import dialect
from coordination.models import (
    Agent,
    AgentSession,
    ExpectedPath,
    FileClaim,
    Issue,
    IssueLink,
    Project,
    Workspace,
)
from coordination.paths import ancestors, is_directory, subtree_bounds
from coordination.selectors.issues import ready_issues
from coordination.services import bulk, logs

PAGE = 100


def expected_rows(workspace: Workspace, issue_id: int, paths: list[str]) -> list[ExpectedPath]:
    """What ``graph.set_expected_paths`` writes, for a bulk load."""
    rows = []
    for path in paths:
        end = subtree_bounds(path)[1] if is_directory(path) else ""
        rows.append(
            ExpectedPath(
                workspace=workspace, issue_id=issue_id, path=path, probe=path, subtree_end=end
            )
        )
        rows += [
            ExpectedPath(workspace=workspace, issue_id=issue_id, path=path, probe=above)
            for above in ancestors(path)
        ]
    return rows


class Command(BaseCommand):
    help = "Benchmark the ready queue over the work graph (blockers, collisions)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--issues", type=int, default=10_000)
        parser.add_argument("--links", type=int, default=20_000)
        parser.add_argument("--claims", type=int, default=2_000)
        parser.add_argument("--repeat", type=int, default=30)

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.create(slug=f"bench-{uuid.uuid4().hex[:8]}", name="Bench")
        try:
            started = time.perf_counter()
            self.load(workspace, options["issues"], options["links"], options["claims"])
            self.stdout.write(
                f"{connection.vendor}: loaded {options['issues']:,} issues, "
                f"{options['links']:,} links, {options['claims']:,} live claims "
                f"in {time.perf_counter() - started:.1f} s"
            )
            for label, flags in (
                ("plain order (avoid_collisions=false)", {"avoid_collisions": False}),
                ("collision-free first (the default)", {"avoid_collisions": True}),
                ("free=true", {"free": True}),
            ):
                self.measure(workspace, label, flags, options["repeat"])
        finally:
            with bulk.loading(workspace.pk), connection.cursor() as cursor:
                cursor.execute(
                    f"DELETE FROM {FileClaim._meta.db_table} WHERE workspace_id = %s",
                    [workspace.pk],
                )
                logs.delete_workspace(workspace)

    def load(self, workspace: Workspace, issues: int, links: int, claims: int) -> None:
        rng = random.Random(16)
        now = timezone.now()
        projects = Project.objects.bulk_create(
            Project(workspace=workspace, key=key, name=key)
            for key in ("web", "api", "infra", "data")
        )
        made = Issue.objects.bulk_create(
            (
                Issue(
                    workspace=workspace,
                    project=projects[n % 4],
                    title=f"Issue {n}",
                    description=f"Done when module {n % 97} passes.",
                    status=rng.choice(
                        [Issue.Status.TODO] * 4 + [Issue.Status.DONE, Issue.Status.BACKLOG]
                    ),
                    priority=rng.choice(Issue.Priority.values),
                    created_at=now - timedelta(days=rng.random() * 90),
                )
                for n in range(issues)
            ),
            batch_size=2_000,
        )
        ids = [issue.pk for issue in made]
        pairs: set[tuple[int, int]] = set()
        while len(pairs) < links:
            first, second = sorted(rng.sample(range(issues), 2))
            pairs.add((ids[first], ids[second]))  # older to newer: never a cycle
        IssueLink.objects.bulk_create(
            (
                IssueLink(workspace=workspace, type="blocks", source_id=s, target_id=t)
                for s, t in pairs
            ),
            batch_size=5_000,
        )
        expected = []
        for n, issue_id in enumerate(ids):
            module = f"src/pkg{n % 50}/mod{n % 400}"
            expected += expected_rows(workspace, issue_id, [f"{module}.py", f"{module}/"])
        ExpectedPath.objects.bulk_create(expected, batch_size=5_000)
        agents = Agent.objects.bulk_create(
            Agent(workspace=workspace, name=f"holder-{n}") for n in range(100)
        )
        sessions = AgentSession.objects.bulk_create(
            AgentSession(workspace=workspace, agent=agent) for agent in agents
        )
        holders = Issue.objects.bulk_create(
            Issue(
                workspace=workspace,
                project=projects[0],
                title=f"Held {n}",
                status=Issue.Status.IN_PROGRESS,
            )
            for n in range(100)
        )
        held = []
        for n in range(claims):
            owner = n % 100
            path = f"src/pkg{n % 50}/mod{n % 400}.py" if n % 10 == 0 else f"lib/h{n}/file.py"
            held.append((owner, path))
        FileClaim.objects.bulk_create(
            FileClaim(
                workspace=workspace,
                issue=holders[owner],
                session=sessions[owner],
                agent=agents[owner],
                path=path,
                claimed_at=now,
            )
            for owner, path in dict((p, (o, p)) for o, p in held).values()
        )
        analyze(Issue, IssueLink, ExpectedPath, FileClaim, AgentSession)

    def measure(
        self, workspace: Workspace, label: str, flags: dict[str, bool], repeat: int
    ) -> None:
        timings = []
        statements = 0
        for _ in range(repeat):
            with CaptureQueriesContext(connection) as captured:
                started = time.perf_counter()
                queue = ready_issues(
                    workspace,
                    avoid_collisions=flags.get("avoid_collisions", True),
                    free=flags.get("free", False),
                )
                count = queue.count()
                page = queue[0 : min(PAGE, count)]
                timings.append((time.perf_counter() - started) * 1000)
            statements = len(captured.captured_queries)
        timings.sort()
        colliding = sum(bool(issue.graph.collisions) for issue in page)  # type: ignore[attr-defined]
        p95 = timings[min(len(timings) - 1, int(len(timings) * 0.95))]
        self.stdout.write(
            f"  ready queue, {label}: {count:,} issues, first page of {len(page)}"
            f" ({colliding} colliding): median {statistics.median(timings):.1f} ms,"
            f" p95 {p95:.1f} ms, {statements} statements"
        )
        d = dialect()
        form = sql.Queue(
            workspace_id=workspace.pk,
            avoid_collisions=flags.get("avoid_collisions", True),
            free=flags.get("free", False),
        )
        work = {
            "count": database_work(sql.queue_count(d, form)),
            "page": database_work(sql.queue_page(d, form, limit=PAGE, offset=0)),
        }
        unit = "buffer hits" if d.postgres else "VM steps"
        self.stdout.write(
            f"    database work ({unit}): count {work['count']:,}, page {work['page']:,}"
        )


def database_work(statement: sql.Statement) -> int:
    """What one run of ``statement`` costs the database, whatever the machine's load:
    PostgreSQL's shared buffer hits, SQLite's virtual-machine steps (to the hundred)."""
    text, params = statement
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {text}", params)
            (plan,) = cursor.fetchone()[0]
            return int(plan["Plan"]["Shared Hit Blocks"])
        steps = 0

        def step() -> int:
            nonlocal steps
            steps += 100
            return 0  # carry on

        raw = connection.connection
        raw.set_progress_handler(step, 100)
        try:
            cursor.execute(text, params)
            cursor.fetchall()
        finally:
            raw.set_progress_handler(None, 100)
        return steps
