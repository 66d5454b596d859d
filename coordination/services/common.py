"""Pieces shared by the lease, file-claim and worktree-lock services."""

from typing import Any

from django.db import connection, models
from django.db.models import QuerySet

from coordination.liveness import DbNow, db_now_sql, live_session_sql
from coordination.models import AgentSession, ReleaseReason


def release_unreleased(rows: QuerySet[Any], reason: str) -> int:
    """Release the unreleased rows of a lease/claim/lock queryset with ``reason``.

    Returns how many changed; rows already released keep their first reason.
    """
    return rows.filter(released_at__isnull=True).update(released_at=DbNow(), release_reason=reason)


def release_if_holder_dead(row: models.Model, *, sessionless_is_dead: bool = True) -> bool:
    """Release a lease/claim/lock as ``expired`` iff its holder session is not live.

    Invariant 4: a dead holder's row is reclaimed by the next claimer, in its call.
    Compare-and-set in one statement: 0 rows means the holder is live (or was
    revived), or another claimer released it first. A row whose session is gone
    counts as dead unless ``sessionless_is_dead`` is false (file claims: a claim
    without a session has no heartbeat and is held until forced).
    """
    table = row._meta.db_table
    sessionless = "session_id IS NULL OR" if sessionless_is_dead else "session_id IS NOT NULL AND"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {table} SET released_at = {db_now_sql()}, release_reason = %s
            WHERE id = %s AND released_at IS NULL
              AND ({sessionless} NOT EXISTS (
                    SELECT 1 FROM {AgentSession._meta.db_table} s
                    WHERE s.id = {table}.session_id AND {live_session_sql("s")}))
            """,
            [ReleaseReason.EXPIRED, row.pk],
        )
        return cursor.rowcount == 1
