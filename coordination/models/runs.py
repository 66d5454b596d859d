"""Runs and the worktree locks they hold (invariant 10 (lock mode per run))."""

from __future__ import annotations

from django.db import models
from django.db.models import Case, Q, When

from coordination.liveness import DbNow, live_q
from coordination.models.holdings import Holding
from coordination.models.tenancy import Workspace
from coordination.models.tracker import Agent, AgentSession, Issue, Worktree


class RunQuerySet(models.QuerySet["Run"]):
    def with_live(self) -> RunQuerySet:
        """``is_live``: running, and its session is live (a crashed holder's run is not)."""
        return self.annotate(
            is_live=Case(When(Q(status="running") & live_q("session__"), then=True), default=False)
        )


class Run(models.Model):
    """One dispatch of an issue to a session, with the lock mode it resolved to.

    Like a session, a run's liveness is derived: a run whose session died stays
    ``running`` (its lock is reclaimed by the next dispatcher) but is not live.
    """

    class LockMode(models.TextChoices):
        NONE = "none"
        EXCLUSIVE = "exclusive"

    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        SKIPPED = "skipped"

    class Error(models.TextChoices):
        WORKTREE_UNRESOLVED = "worktree_unresolved"
        WORKTREE_BUSY = "worktree_busy"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    issue = models.ForeignKey(Issue, on_delete=models.CASCADE, related_name="runs")
    session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="runs"
    )
    agent = models.ForeignKey(Agent, null=True, on_delete=models.SET_NULL, related_name="+")
    lock_mode = models.CharField(max_length=10, choices=LockMode.choices, default=LockMode.NONE)
    worktree = models.ForeignKey(
        Worktree, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    error = models.CharField(max_length=32, choices=Error.choices, blank=True)
    error_detail = models.TextField(blank=True, help_text="What the operator needs to fix.")
    started_at = models.DateTimeField(db_default=DbNow(), editable=False)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["workspace", "status"])]

    def __str__(self) -> str:
        return f"run {self.pk} of issue {self.issue_id}"


class WorktreeLock(Holding):
    """The exclusive lock a run holds on a worktree; live while its holder session is."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    worktree = models.ForeignKey(Worktree, on_delete=models.CASCADE, related_name="locks")
    session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="worktree_locks"
    )
    run = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="locks")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["worktree"],
                condition=Q(released_at__isnull=True),
                name="one_unreleased_lock_per_worktree",
            ),
            # "Never reused", proved by the database.
            models.UniqueConstraint(fields=["worktree", "fence"], name="lock_fence_unique"),
        ]

    def __str__(self) -> str:
        return f"lock on worktree {self.worktree_id}"
