"""Pieces shared by the lease, file-claim and worktree-lock services."""

from typing import Any

from django.db.models import QuerySet

from coordination.liveness import DbNow


def release_unreleased(rows: QuerySet[Any], reason: str) -> int:
    """Release the unreleased rows of a lease/claim/lock queryset with ``reason``.

    Returns how many changed; rows already released keep their first reason.
    """
    return rows.filter(released_at__isnull=True).update(released_at=DbNow(), release_reason=reason)
