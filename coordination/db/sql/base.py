"""The ground every statement stands on: table names, column lists, the dialect."""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any

Statement = tuple[str, list[Any]]

# --- tables and their columns ------------------------------------------------------------

# The models' db_table (tests pin them against the models).
API_KEY = "coordination_apikey"
KEY_RING = "coordination_key_ring_version"
WORKSPACE = "coordination_workspace"
WORKTREE = "coordination_worktree"
PROJECT = "coordination_project"
AGENT = "coordination_agent"
SESSION = "agent_sessions"
ISSUE = "coordination_issue"
LEASE = "issue_leases"
CLAIM = "issue_file_claims"
CONFLICT = "claim_conflicts"
WORKTREE_LOCK = "coordination_worktreelock"
RUN = "coordination_run"
LOG_UNLOCK = "projektor_log_unlock"
EVENT = "coordination_event"

# The first half of every two-part advisory key: one namespace per kind of lock, so
# they never meet each other or another application's advisory locks (netbox's
# ADVISORY_LOCK_KEYS habit). The lock order is told in coordination.services.locking.
ADVISORY_LOCK_KEYS = {
    "file_claim_path": 0x50464C,  # "PFL"
    "event_log": 0x50454C,  # "PEL": one per workspace, held by its event writer to commit
}

# Every concrete column of each model, in the model's field order: rows read with these
# become fully loaded model instances (``rows.instance``), never half-loaded ones whose
# later attribute reads would quietly query. Derived from the models, never written by
# hand: ``coordination.db.columns`` fills it when Django is ready, and the bench's
# direct ceiling (which runs without Django) from what its command read off the models.
COLUMNS: dict[str, tuple[str, ...]] = {}


@cache  # a few dozen (table, alias) pairs; every statement of every request names some
def columns(table: str, alias: str) -> str:
    """``alias.column, ...`` for every column of ``table``."""
    return ", ".join(f"{alias}.{column}" for column in COLUMNS[table])


@cache
def related_columns(table: str, key: str) -> str:
    """Every column of the ``table`` row whose id is ``key``, one primary-key subquery
    each (all NULL when ``key`` is): another table's row in a ``RETURNING`` list,
    which on SQLite may name no table but the one it changes."""
    return ", ".join(
        f"(SELECT r.{column} FROM {table} r WHERE r.id = {key})" for column in COLUMNS[table]
    )


def set_columns(derived: Mapping[str, tuple[str, ...]]) -> None:
    """Fill ``COLUMNS`` (table: its columns) and forget the lists built from it."""
    COLUMNS.clear()
    COLUMNS.update(derived)
    columns.cache_clear()
    related_columns.cache_clear()


def placeholders(values: Sequence[Any]) -> str:
    """``%s, %s, %s`` for an ``IN (...)`` list of ``values``."""
    return ", ".join(["%s"] * len(values))


# --- the dialect: clock, liveness, locks ---------------------------------------------------


@dataclass(frozen=True)
class Dialect:
    """What a statement needs to know of its connection."""

    vendor: str  # "postgresql" or "sqlite"
    ttl_seconds: int  # PROJEKTOR_SESSION_TTL_SECONDS
    stall_seconds: int = 1800  # PROJEKTOR_STALL_AFTER_SECONDS

    @property
    def postgres(self) -> bool:
        return self.vendor == "postgresql"

    def now(self) -> str:
        """The database's clock (invariant 1 (liveness): one clock writes and judges heartbeats).

        SQLite stores datetimes as ISO text; ``%f`` has milliseconds only, and the
        padding to microseconds keeps text comparisons with Django-written values
        right."""
        if self.postgres:
            return "statement_timestamp()"
        return "(strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now') || '000')"

    def live(self, alias: str) -> str:
        """Invariant 1 (liveness), as SQL: the session row ``alias`` is active and its last
        heartbeat is younger than the TTL."""
        ttl = int(self.ttl_seconds)
        if self.postgres:
            cutoff = f"statement_timestamp() - interval '{ttl} seconds'"
        else:
            cutoff = f"(strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '-{ttl} seconds') || '000')"
        return f"({alias}.status = 'active' AND {alias}.last_heartbeat_at > {cutoff})"

    def ago(self, seconds: int) -> str:
        """The database's clock ``seconds`` ago, comparable with stored stamps."""
        if self.postgres:
            return f"statement_timestamp() - interval '{int(seconds)} seconds'"
        return f"(strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '-{int(seconds)} seconds') || '000')"

    def earlier(self, by: timedelta | None) -> str:
        """The database's clock, ``by`` earlier (``None``: now), to the microsecond: the
        stamp of a log row recorded into the past (``services.logs.recorded_earlier``)."""
        if by is None:
            return self.now()
        seconds = f"{by.total_seconds():.6f}"
        if self.postgres:
            return f"(statement_timestamp() - interval '{seconds} seconds')"
        return f"(strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '-{seconds} seconds') || '000')"

    def stalled(self, alias: str) -> str:
        """Invariant 17 (stalled is derived), as SQL: the session row ``alias`` is live and has made
        no progress for ``PROJEKTOR_STALL_AFTER_SECONDS``."""
        since = self.ago(self.stall_seconds)
        return f"({self.live(alias)} AND {alias}.last_progress_at <= {since})"

    def young(self, alias: str) -> str:
        """Invariant 17 (stalled is derived): the lease row ``alias`` is within its project's age
        cap."""
        return f"({alias}.ages_out_at IS NULL OR {alias}.ages_out_at > {self.now()})"

    def lease_live(self, lease: str, session: str) -> str:
        """A lease's liveness: its holder ``session`` live and the lease young."""
        return f"({self.live(session)} AND {self.young(lease)})"

    def ages_out_at(self, cap: str) -> str:
        """Now plus ``cap`` seconds (an SQL expression; NULL when it is)."""
        if self.postgres:
            return f"(statement_timestamp() + make_interval(secs => {cap}))"
        return f"(strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '+' || {cap} || ' seconds') || '000')"

    def lock(self, clause: str) -> str:
        """`` FOR UPDATE`` and the like on PostgreSQL; nothing on SQLite, whose
        ``BEGIN IMMEDIATE`` already made this transaction the only writer."""
        return f" {clause}" if self.postgres else ""

    def sqlite_only(self, clause: str) -> str:
        """`` INDEXED BY ...`` and the like on SQLite; nothing on PostgreSQL. SQLite's
        planner has no statistics unless someone runs ANALYZE, and skewed ones can be
        worse: a hot statement whose cost must follow what it finds names its index."""
        return "" if self.postgres else f" {clause}"

    # --- lists of any length as one parameter --------------------------------------------
    # A claim's ancestors and subtrees come in lists whose length the caller does not
    # bound (100 paths of up to 512 segments each): an IN list of placeholders could
    # pass the backend's limit on parameters, and its text would change with each
    # length. PostgreSQL takes an array, SQLite a JSON array (json_each, built in).

    def any_of(self, expression: str) -> str:
        """``expression`` equals one of the values of one parameter (``listed``)."""
        if self.postgres:
            return f"{expression} = ANY(%s::text[])"
        return f"{expression} IN (SELECT value FROM json_each(%s))"

    def among(self, expression: str, subquery: str) -> str:
        """``expression`` is one of the values ``subquery`` returns, looked up by
        ``expression``'s index: on PostgreSQL ``= ANY(ARRAY(...))``, a subplan run once,
        since as ``IN (...)`` the planner may hash-join the whole table against it."""
        if self.postgres:
            return f"{expression} = ANY(ARRAY({subquery}))"
        return f"{expression} IN ({subquery})"

    def listed(self, values: Sequence[str]) -> Any:
        """The parameter of ``any_of``."""
        return list(values) if self.postgres else json.dumps(list(values))

    def ranges(self, alias: str, lows: Sequence[str], highs: Sequence[str]) -> Statement:
        """A FROM item ``alias(low, high)``: one row per pair of bounds."""
        if self.postgres:
            return f"unnest(%s::text[], %s::text[]) AS {alias}(low, high)", [
                list(lows),
                list(highs),
            ]
        pairs = json.dumps([[low, high] for low, high in zip(lows, highs, strict=True)])
        return (
            "(SELECT json_extract(value, '$[0]') AS low, json_extract(value, '$[1]') AS high"
            f" FROM json_each(%s)) AS {alias}",
            [pairs],
        )
