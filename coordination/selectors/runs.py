"""Worktrees and runs."""

from collections.abc import Mapping
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from coordination.filtersets import RunFilter
from coordination.models import Run, Workspace, Worktree, WorktreeLock
from coordination.selectors.filtering import filtered


def worktrees(workspace: Workspace) -> QuerySet[Worktree]:
    return Worktree.objects.filter(workspace=workspace).order_by("slug")


def runs(workspace: Workspace) -> QuerySet[Run]:
    """Each run with ``lock_fence``: the fence of its worktree lock (a run takes at
    most one), or None; one subquery, so a list costs no query per run."""
    lock = WorktreeLock.objects.filter(run=OuterRef("pk")).order_by("-id").values("fence")[:1]
    return (
        Run.objects.filter(workspace=workspace)
        .with_live()
        .annotate(lock_fence=Subquery(lock))
        .select_related("worktree")
        .order_by("-id")
    )


def run_list(*, workspace: Workspace, filters: Mapping[str, Any] | None = None) -> QuerySet[Run]:
    return filtered(RunFilter, runs(workspace), filters)
