"""The landing queue: each project's entries, served in order of arrival by testers that
run git and the check (invariant 21 (the default branch is always green))."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from coordination.liveness import DbNow
from coordination.models.tenancy import Workspace
from coordination.models.tracker import Agent, AgentSession, Issue, Project

DETAIL_MAX = 4000  # a rejection's detail: the conflicting files, or the check's tail


class Landing(models.Model):
    """A branch queued to land on the default branch, with the lease it was queued
    under. ``testing`` under a batch ``fence`` by a tester session; a batch whose tester
    is not live is the next take's, whole (invariant 4 (stale reclaim): no sweeper)."""

    class State(models.TextChoices):
        QUEUED = "queued"
        TESTING = "testing"
        LANDED = "landed"
        REJECTED = "rejected"

    class Reason(models.TextChoices):
        CONFLICT = "conflict"  # does not apply on what landed before it
        CHECK_FAILED = "check_failed"  # the check failed on its tree (bisected)
        STALE_FENCE = "stale_fence"  # its lease was lost before a tester took it

    OPEN = (State.QUEUED, State.TESTING)

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="landings")
    issue = models.ForeignKey(Issue, on_delete=models.CASCADE, related_name="landings")
    session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="landings"
    )
    agent = models.ForeignKey(Agent, null=True, on_delete=models.SET_NULL, related_name="+")
    branch = models.CharField(max_length=255)
    commit = models.CharField(max_length=64)
    lease_fence = models.PositiveBigIntegerField()
    # The issue's live claims when it was queued: a batch is made of entries whose
    # paths overlap none of the earlier ones' (invariant 11 (overlap)).
    paths = models.JSONField(default=list)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    reason = models.CharField(max_length=16, choices=Reason.choices, blank=True)
    detail = models.TextField(blank=True)
    fence = models.PositiveBigIntegerField(null=True, blank=True)  # the batch's, while testing
    tester = models.ForeignKey(
        AgentSession, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tester_agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    landed_commit = models.CharField(max_length=64, blank=True)
    queued_at = models.DateTimeField(db_default=DbNow(), editable=False)
    testing_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One open entry per issue: a second queue of it answers landing_exists.
            models.UniqueConstraint(
                fields=["issue"],
                condition=Q(state__in=["queued", "testing"]),
                name="one_open_landing_per_issue",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["queued", "testing", "landed", "rejected"]),
                name="landing_state_valid",
            ),
        ]
        indexes = [
            # The queue: a project's open entries in order of arrival.
            models.Index(
                fields=["project", "id"],
                condition=Q(state__in=["queued", "testing"]),
                name="landing_queue_idx",
            ),
            models.Index(fields=["workspace", "finished_at"], name="landing_finished_idx"),
        ]

    def __str__(self) -> str:
        return f"landing {self.pk} of issue {self.issue_id} ({self.state})"

    @property
    def is_open(self) -> bool:
        return self.state in self.OPEN
