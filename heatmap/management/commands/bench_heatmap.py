"""Measure the heatmap aggregation on a large history, on the configured database.

Loads 1,000,000 claim_conflicts rows and 1,000,000 file claims over 20,000 paths,
spread over 90 days with a few hot spots, into a scratch workspace; then times, on
a 7-day window, the root at depth 2 and a drill-down two levels deep, in contention
and in claims mode, and prints the median (and spread) of each. The scratch rows are
bulk-loaded (this is a measurement, not a demo) and deleted at the end.
"""

import random
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connection, transaction
from django.utils import timezone

from coordination.models import Agent, ClaimConflict, FileClaim, Issue, Project, Workspace
from coordination.services import logs
from heatmap.selectors import Mode, code_heatmap, prefix_counts

TOPS = ("src", "lib", "tests", "docs", "web", "api", "tools", "infra")
DAYS = 90
CHUNK = 20_000


def source_tree(count: int) -> list[str]:
    """``count`` file paths, ``top/dirNN/subNN/fileNNNN.py``, hot ones first."""
    per_top = count // len(TOPS)
    return [
        f"{top}/dir{index % 25:02d}/sub{(index // 25) % 8}/file{index:05d}.py"
        for top in TOPS
        for index in range(per_top)
    ]


class Command(BaseCommand):
    help = "Time the heatmap aggregation over 1M conflicts and 1M claims (medians)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--rows", type=int, default=1_000_000, help="rows per table")
        parser.add_argument("--paths", type=int, default=20_000)
        parser.add_argument("--repeat", type=int, default=15, help="timed runs per query")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--explain", action="store_true", help="print each query's plan")

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.create(slug=f"bench-{uuid.uuid4().hex[:8]}", name="Bench")
        try:
            project = Project.objects.create(workspace=workspace, key="bench", name="Bench")
            agent = Agent.objects.create(workspace=workspace, name="bench-agent")
            issues = [
                Issue.objects.create(workspace=workspace, project=project, title=f"Issue {n}")
                for n in range(200)
            ]
            paths = source_tree(options["paths"])
            started = time.perf_counter()
            self.load(
                workspace,
                [issue.pk for issue in issues],
                agent.pk,
                paths,
                rows=options["rows"],
                seed=options["seed"],
            )
            self.stdout.write(
                f"{connection.vendor}: loaded {options['rows']:,} conflicts and "
                f"{options['rows']:,} claims over {len(paths):,} paths in "
                f"{time.perf_counter() - started:.1f} s"
            )
            self.measure(workspace, paths, options["repeat"], explain=options["explain"])
        finally:
            self.drop(workspace)

    # --- loading ----------------------------------------------------------------------

    def load(
        self,
        workspace: Workspace,
        issue_ids: list[int],
        agent_id: int,
        paths: list[str],
        *,
        rows: int,
        seed: int,
    ) -> None:
        now = timezone.now()
        rng = random.Random(seed)

        def pick_path() -> str:
            # Cubing a uniform draw skews it towards the front: a few hot spots.
            return paths[int(len(paths) * rng.random() ** 3)]

        def moment() -> datetime:
            return now - timedelta(seconds=rng.random() * DAYS * 86_400)

        conflict_rows = (
            (
                workspace.pk,
                pick_path(),
                rng.choice(issue_ids),
                rng.choice(issue_ids),
                agent_id,
                agent_id,
                rng.random() < 0.2,
                self.stamp(moment()),
            )
            for _ in range(rows)
        )
        self.insert(
            f"INSERT INTO {ClaimConflict._meta.db_table} (workspace_id, path, rejected_issue_id,"
            " holding_issue_id, rejected_agent_id, holding_agent_id, forced, occurred_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            conflict_rows,
        )

        def claim_row() -> tuple[Any, ...]:
            claimed = moment()
            return (
                workspace.pk,
                rng.choice(issue_ids),
                agent_id,
                pick_path(),
                self.stamp(claimed),
                self.stamp(min(claimed + timedelta(minutes=rng.randint(1, 240)), now)),
                "released",
            )

        self.insert(
            f"INSERT INTO {FileClaim._meta.db_table} (workspace_id, issue_id, agent_id, path,"
            " claimed_at, released_at, release_reason) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (claim_row() for _ in range(rows)),
        )
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:  # as autovacuum would, before any reads
                cursor.execute(f"ANALYZE {ClaimConflict._meta.db_table}")
                cursor.execute(f"ANALYZE {FileClaim._meta.db_table}")

    @staticmethod
    def stamp(moment: datetime) -> Any:
        """A timestamp as the backend stores it (SQLite: Django's UTC text)."""
        if connection.vendor == "sqlite":
            return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
        return moment

    @staticmethod
    def insert(sql: str, rows: Iterator[tuple[Any, ...]]) -> None:
        while True:
            chunk = [row for _, row in zip(range(CHUNK), rows, strict=False)]
            if not chunk:
                return
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.executemany(sql, chunk)

    # --- measuring --------------------------------------------------------------------

    def measure(
        self, workspace: Workspace, paths: list[str], repeat: int, *, explain: bool
    ) -> None:
        until = timezone.now()
        since = until - timedelta(days=7)
        hot_dir = "/".join(paths[0].split("/")[:2])  # the hottest second-level directory
        modes: tuple[Mode, ...] = ("contention", "claims")
        for mode in modes:
            for label, prefix in (("root, depth 2", ""), (f"drill {hot_dir}", hot_dir)):
                window: dict[str, Any] = {
                    "workspace": workspace,
                    "mode": mode,
                    "since": since,
                    "until": until,
                    "prefix": prefix,
                    "depth": 2,
                }
                result = code_heatmap(**window)
                times = self.timed(partial(code_heatmap, **window), repeat)
                if explain:
                    # EXPLAIN ANALYZE on PostgreSQL; SQLite knows only the plain form.
                    rows = prefix_counts(**window)
                    if connection.vendor == "postgresql":
                        self.stdout.write(rows.explain(analyze=True))
                    else:
                        self.stdout.write(rows.explain())
                self.stdout.write(
                    f"  {mode:<10} {label:<24} {len(result.nodes):>5} nodes, "
                    f"{result.total:>7,} events: median {statistics.median(times):7.1f} ms "
                    f"(min {min(times):.1f}, max {max(times):.1f}, n={repeat})"
                )

    @staticmethod
    def timed(query: Callable[[], object], repeat: int) -> list[float]:
        query()  # warm the cache and the connection
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            query()
            times.append((time.perf_counter() - started) * 1000)
        return times

    # --- cleaning up ------------------------------------------------------------------

    @staticmethod
    def drop(workspace: Workspace) -> None:
        """Delete the scratch rows with plain DELETEs (the ORM would load 2M rows),
        through the door the append-only logs keep for deleting a workspace."""
        with logs.unlocked(workspace.pk), connection.cursor() as cursor:
            for model in (ClaimConflict, FileClaim):
                cursor.execute(
                    f"DELETE FROM {model._meta.db_table} WHERE workspace_id = %s", [workspace.pk]
                )
            workspace.delete()
