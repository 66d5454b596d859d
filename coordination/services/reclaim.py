"""Reclaim a dead holder, then retry: how a take of a held row (a lease, a worktree
lock, file claims) gets past the row in its way, and the one budget of its retries
(invariant 4 (stale reclaim): a dead holder's row is reclaimed by the next claimer, in its call).

A take runs ``attempts``: each attempt tries to take, and when a row stands in its
way looks at it (``clear_the_way``). A live holder keeps it: the take is refused,
naming the holder. A dead holder's row is released ``expired`` by this take; a row
released since it was read is gone: either way the attempt raises ``Retry`` and the
next one tries again. File claims reclaim every dead holder an attempt finds in one
statement, and retry when one of them revived meanwhile or a path was taken after
their locks.
"""

from collections.abc import Callable
from typing import TypeVar

from django.db import models

from coordination.db import sql
from coordination.db.rows import dialect, execute, fetchone
from coordination.models import ReleaseReason

T = TypeVar("T")

# Every retry follows a row that changed hands between two statements of the take: a
# dead holder it reclaimed, a holder that released or revived, a path taken after its
# locks. The first retry nearly always succeeds (after a reclaim, the way is clear);
# the next two ride out a burst of such churn. After four attempts the row is plainly
# contended: the take reports who holds it now rather than spin, holding its
# project's or its paths' locks while it does.
ATTEMPTS = 4


class Retry(Exception):
    """What the attempt met changed hands: try again. An attempt that ran its own
    ``events.change()`` block is rolled back by it; one inside its caller's keeps
    what it did (the reclaim)."""


def attempts(attempt: Callable[[int], T], *, exhausted: Callable[[], T]) -> T:
    """``attempt(n)`` for n = 0, 1, ... until one returns rather than raise ``Retry``,
    at most ``ATTEMPTS`` of them; ``exhausted()`` once they are spent."""
    for number in range(ATTEMPTS):
        try:
            return attempt(number)
        except Retry:
            continue
    return exhausted()


def release_if_holder_dead(row: models.Model) -> bool:
    """Release a lease or worktree lock ``expired`` iff its holder session is not live
    (one whose session is gone included); False if its holder is live, or someone
    released it first."""
    statement = sql.release_if_holder_dead(
        dialect(), table=row._meta.db_table, row_id=row.pk, reason=ReleaseReason.EXPIRED
    )
    return execute(statement) == 1


def clear_the_way(row: models.Model, *, reclaimed: Callable[[], None] | None = None) -> None:
    """``row`` was read unreleased in a take's way. Its holder dead: release it
    ``expired``, tell ``reclaimed`` (its announcement) and ``Retry``; released since
    it was read: ``Retry``. Returns only while a live holder keeps it."""
    if release_if_holder_dead(row):
        if reclaimed is not None:
            reclaimed()
        raise Retry
    if fetchone(sql.unreleased_row(table=row._meta.db_table, row_id=row.pk)) is None:
        raise Retry
