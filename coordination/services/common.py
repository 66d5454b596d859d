"""Pieces shared by the lease, file-claim and worktree-lock services."""

from typing import Any

from django.db import models
from django.db.models import QuerySet

from coordination.liveness import DbNow
from coordination.models import ReleaseReason
from coordination.services import sql
from coordination.services.rows import dialect, execute


def release_unreleased(rows: QuerySet[Any], reason: str) -> int:
    """Release the unreleased rows of a lease/claim/lock queryset with ``reason``.

    Returns how many changed; rows already released keep their first reason.
    """
    return rows.filter(released_at__isnull=True).update(released_at=DbNow(), release_reason=reason)


def release_if_holder_dead(row: models.Model, *, sessionless_is_dead: bool = True) -> bool:
    """Release a lease/claim/lock as ``expired`` iff its holder session is not live.

    Invariant 4: a dead holder's row is reclaimed by the next claimer, in its call.
    A row whose session is gone counts as dead unless ``sessionless_is_dead`` is
    false (file claims: a claim without a session has no heartbeat and is held until
    forced).
    """
    statement = sql.release_if_holder_dead(
        dialect(),
        table=row._meta.db_table,
        row_id=row.pk,
        sessionless_is_dead=sessionless_is_dead,
        reason=ReleaseReason.EXPIRED,
    )
    return execute(statement) == 1
