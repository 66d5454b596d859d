"""The rate-limit counters on the database cache (``coordination.services.rate_limits``):
an atomic increment, the ended windows forgotten, PostgreSQL's unlogged table."""

from typing import Any

from coordination.db.sql.base import Statement


def count_hit(*, quoted_table: str, key: str, expires: Any) -> Statement:
    """One atomic increment of a rate-limit counter (an upsert), returning the count."""
    return (
        f"INSERT INTO {quoted_table} (cache_key, value, expires) VALUES (%s, '1', %s)"
        " ON CONFLICT (cache_key) DO UPDATE"
        f" SET value = CAST(CAST({quoted_table}.value AS INTEGER) + 1 AS TEXT)"
        " RETURNING value",
        [key, expires],
    )


def forget_ended_windows(*, quoted_table: str, now: Any) -> Statement:
    return f"DELETE FROM {quoted_table} WHERE expires < %s", [now]


def table_persistence(*, table: str) -> Statement:
    """PostgreSQL: ``p`` for a logged table, ``u`` for an unlogged one; no row if absent."""
    return "SELECT relpersistence FROM pg_class WHERE oid = to_regclass(%s)", [table]


def set_unlogged(*, quoted_table: str) -> Statement:
    """PostgreSQL: the table writes no WAL; a crash or a failover empties it."""
    return f"ALTER TABLE {quoted_table} SET UNLOGGED", []
