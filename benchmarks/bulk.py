"""The bench's bulk loads, one per backend: PostgreSQL builds the rows itself
(``INSERT ... SELECT`` over ``generate_series``), SQLite is sent them
(``executemany`` in one transaction). ``load`` decides what to load; this module
only writes it, as fast as each backend allows.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from django.utils import timezone

from coordination.models import AgentSession, ClaimConflict, FileClaim

if TYPE_CHECKING:
    from benchmarks.load import BenchWorkspace, Volumes

HISTORY_DAYS = 90
ROWS_PER_EXECUTEMANY = 20_000
TOP_DIRECTORIES = ("src", "lib", "tests", "docs", "web", "api", "tools", "infra")

SESSIONS = AgentSession._meta.db_table
CLAIMS = FileClaim._meta.db_table
CONFLICTS = ClaimConflict._meta.db_table


def postgres() -> bool:
    return connection.vendor == "postgresql"


def stamp(moment: datetime) -> Any:
    """A timestamp as the backend stores it (SQLite: Django's UTC text, microseconds)."""
    if postgres():
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def execute_many(sql: str, rows: Iterator[tuple[Any, ...]]) -> None:
    """Insert ``rows`` in chunks, all in one transaction (SQLite)."""
    with transaction.atomic(), connection.cursor() as cursor:
        while chunk := [row for _, row in zip(range(ROWS_PER_EXECUTEMANY), rows, strict=False)]:
            cursor.executemany(sql, chunk)


def source_tree(count: int) -> list[str]:
    """``count`` paths, ``top/dirNN/subN/fileNNNNN.py``, for the loaded history."""
    per_top = max(1, count // len(TOP_DIRECTORIES))
    return [
        f"{top}/dir{index % 25:02d}/sub{(index // 25) % 8}/file{index:05d}.py"
        for top in TOP_DIRECTORIES
        for index in range(per_top)
    ]


def tree_path_sql(number: str, count: int) -> str:
    """SQL for ``source_tree(count)[number]``: the path is built from its number, since
    indexing a large text array costs PostgreSQL a walk along it for every row."""
    per_top = max(1, count // len(TOP_DIRECTORIES))
    tops = ", ".join(f"'{top}'" for top in TOP_DIRECTORIES)
    index = f"({number} %% {per_top})"
    return (
        f"(ARRAY[{tops}])[1 + {number} / {per_top}]"
        f" || '/dir' || lpad(({index} %% 25)::text, 2, '0')"
        f" || '/sub' || (({index} / 25) %% 8)::text"
        f" || '/file' || lpad({index}::text, 5, '0') || '.py'"
    )


# --- live: stale sessions -------------------------------------------------------------


def load_stale_sessions_postgres(
    bench: BenchWorkspace, volumes: Volumes, agents: list[int]
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {SESSIONS} (workspace_id, agent_id, status, started_at,
                                    last_heartbeat_at, ended_at)
            SELECT %s, (%s::bigint[])[1 + n %% %s],
                   CASE WHEN n %% 2 = 0 THEN 'ended' ELSE 'active' END,
                   started, started + lived,
                   CASE WHEN n %% 2 = 0 THEN started + lived END
            FROM (SELECT n,
                         statement_timestamp() - interval '1 day'
                           - random() * interval '{HISTORY_DAYS - 1} days' AS started,
                         random() * interval '8 hours' AS lived
                  FROM generate_series(1, %s) AS n) AS generated
            """,
            [bench.pk, agents, len(agents), volumes.stale_sessions],
        )


def load_stale_sessions_sqlite(bench: BenchWorkspace, volumes: Volumes, agents: list[int]) -> None:
    now = timezone.now()
    rng = random.Random(1)

    def session_row(n: int) -> tuple[Any, ...]:
        started = now - timedelta(days=1 + rng.random() * (HISTORY_DAYS - 1))
        last = started + timedelta(hours=8 * rng.random())
        ended = n % 2 == 0
        return (
            bench.pk,
            agents[n % len(agents)],
            "ended" if ended else "active",
            stamp(started),
            stamp(last),
            stamp(last) if ended else None,
        )

    execute_many(
        f"INSERT INTO {SESSIONS} (workspace_id, agent_id, status, started_at,"
        " last_heartbeat_at, ended_at) VALUES (%s, %s, %s, %s, %s, %s)",
        (session_row(n) for n in range(1, volumes.stale_sessions + 1)),
    )


# --- growth: history ------------------------------------------------------------------


def load_history_postgres(
    bench: BenchWorkspace,
    volumes: Volumes,
    agents: list[int],
    issues: list[int],
) -> None:
    def pick(array: str, size: int) -> str:
        return f"({array})[1 + floor(random() * {size})::int]"

    issue = pick("%(issues)s::bigint[]", len(issues))
    agent = pick("%(agents)s::bigint[]", len(agents))
    path_count = len(source_tree(volumes.history_paths))
    path = tree_path_sql("path_number", path_count)
    # A cubed uniform draw favours the first paths: a few hot spots, a long tail.
    path_number = f"floor(power(random(), 3) * {path_count})::int AS path_number"
    params: dict[str, Any] = {"workspace": bench.pk, "issues": issues, "agents": agents}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {CLAIMS} (workspace_id, issue_id, agent_id, path, claimed_at,
                                  released_at, release_reason)
            SELECT %(workspace)s, {issue}, {agent}, {path}, claimed,
                   LEAST(claimed + interval '1 minute' + random() * interval '4 hours',
                         statement_timestamp()),
                   'released'
            FROM (SELECT statement_timestamp() - random() * interval '{HISTORY_DAYS} days'
                           AS claimed,
                         {path_number}
                  FROM generate_series(1, %(rows)s)) AS generated
            """,
            {**params, "rows": volumes.history_claims},
        )
        cursor.execute(
            f"""
            INSERT INTO {CONFLICTS} (workspace_id, path, rejected_issue_id, rejected_agent_id,
                                     holding_issue_id, holding_agent_id, forced, occurred_at)
            SELECT %(workspace)s, {path}, {issue}, {agent}, {issue}, {agent}, random() < 0.2,
                   statement_timestamp() - random() * interval '{HISTORY_DAYS} days'
            FROM (SELECT {path_number} FROM generate_series(1, %(rows)s)) AS generated
            """,
            {**params, "rows": volumes.history_conflicts},
        )


def load_history_sqlite(
    bench: BenchWorkspace,
    volumes: Volumes,
    agents: list[int],
    issues: list[int],
    paths: list[str],
) -> None:
    rng = random.Random(3)
    now = timezone.now()

    def path() -> str:
        return paths[int(len(paths) * rng.random() ** 3)]

    def moment() -> datetime:
        return now - timedelta(days=rng.random() * HISTORY_DAYS)

    def claim_row() -> tuple[Any, ...]:
        claimed = moment()
        released = min(claimed + timedelta(minutes=1 + rng.random() * 240), now)
        return (
            bench.pk,
            rng.choice(issues),
            rng.choice(agents),
            path(),
            stamp(claimed),
            stamp(released),
            "released",
        )

    def conflict_row() -> tuple[Any, ...]:
        return (
            bench.pk,
            path(),
            rng.choice(issues),
            rng.choice(agents),
            rng.choice(issues),
            rng.choice(agents),
            rng.random() < 0.2,
            stamp(moment()),
        )

    execute_many(
        f"INSERT INTO {CLAIMS} (workspace_id, issue_id, agent_id, path, claimed_at,"
        " released_at, release_reason) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (claim_row() for _ in range(volumes.history_claims)),
    )
    execute_many(
        f"INSERT INTO {CONFLICTS} (workspace_id, path, rejected_issue_id, rejected_agent_id,"
        " holding_issue_id, holding_agent_id, forced, occurred_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (conflict_row() for _ in range(volumes.history_conflicts)),
    )
