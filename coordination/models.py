"""Coordination tables. Every row carries its workspace; liveness is derived.

Timestamps that take part in liveness or ordering are written by the database
(``db_default=DbNow()``), so one clock judges every heartbeat (invariant 1).
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any, Self

from django.conf import settings
from django.db import models
from django.db.models import Case, Q, When

from coordination.liveness import DbNow, live_q

# Ids are bigint: the largest one that exists, so an input past it is refused early.
MAX_ID = 2**63 - 1


class ReleaseReason(models.TextChoices):
    """Why a lease, file claim or worktree lock ended (invariant 7)."""

    RELEASED = "released"
    AGENT_ENDED = "agent_ended"
    EXPIRED = "expired"
    OVERRIDDEN = "overridden"
    ISSUE_CLOSED = "issue_closed"
    WORKTREE_UNRESOLVED = "worktree_unresolved"


class Workspace(models.Model):
    """The tenant: every query is scoped by it (invariant 9)."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="projektor_workspaces"
    )
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)

    def __str__(self) -> str:
        return self.slug


def hash_api_key(raw_key: str) -> str:
    # Keys are 256-bit random tokens, so a plain digest is enough (no stretching).
    return hashlib.sha256(raw_key.encode()).hexdigest()


class ApiKey(models.Model):
    """A workspace's bearer key. Only its hash is stored; revoking is a timestamp."""

    PREFIX = "pk_"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    key_prefix = models.CharField(max_length=12, help_text="First characters, to recognise it.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.key_prefix}… ({self.workspace})"

    @classmethod
    def issue(cls, workspace: Workspace, name: str = "") -> tuple[ApiKey, str]:
        """Create a key; the raw key is returned once and never stored."""
        raw = cls.PREFIX + secrets.token_urlsafe(32)
        key = cls.objects.create(
            workspace=workspace, name=name, key_prefix=raw[:10], key_hash=hash_api_key(raw)
        )
        return key, raw


class Worktree(models.Model):
    """A filesystem checkout that runs can mutate, one writer at a time."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="worktrees")
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=200)
    path = models.CharField(max_length=1024, blank=True)
    branch = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "slug"], name="worktree_slug_unique")
        ]

    def __str__(self) -> str:
        return self.slug


class Project(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="projects")
    key = models.SlugField(max_length=32)
    name = models.CharField(max_length=200)
    agent_wip_limit = models.PositiveIntegerField(default=3)
    primary_worktree = models.ForeignKey(
        Worktree, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "key"], name="project_key_unique"),
            models.CheckConstraint(
                condition=Q(agent_wip_limit__gte=1), name="project_wip_limit_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.key


class Agent(models.Model):
    """A named identity; its presence is an AgentSession."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=100)
    role = models.CharField(max_length=100, blank=True)
    department = models.CharField(max_length=100, blank=True)
    worktree = models.ForeignKey(
        Worktree, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="agent_name_unique")
        ]

    def __str__(self) -> str:
        return self.name


class AgentSessionQuerySet(models.QuerySet["AgentSession"]):
    def live(self) -> AgentSessionQuerySet:
        return self.filter(live_q())

    def with_live(self) -> AgentSessionQuerySet:
        return self.annotate(is_live=Case(When(live_q(), then=True), default=False))


class AgentSession(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        ENDED = "ended"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="sessions")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="sessions")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    started_at = models.DateTimeField(db_default=DbNow(), editable=False)
    last_heartbeat_at = models.DateTimeField(db_default=DbNow(), editable=False)
    ended_at = models.DateTimeField(null=True, blank=True)

    objects = AgentSessionQuerySet.as_manager()

    class Meta:
        db_table = "agent_sessions"  # the original schema's name (DESIGN.md)
        indexes = [
            # "Live sessions of a workspace" is a range scan on active rows only.
            models.Index(
                fields=["workspace", "last_heartbeat_at"],
                condition=Q(status="active"),
                name="session_active_heartbeat_idx",
            )
        ]

    def __str__(self) -> str:
        return f"session {self.pk} of {self.agent_id}"


class Issue(models.Model):
    class Status(models.TextChoices):
        BACKLOG = "backlog"
        TODO = "todo"
        IN_PROGRESS = "in_progress"
        IN_REVIEW = "in_review"
        DONE = "done"
        CANCELLED = "cancelled"

    class Priority(models.IntegerChoices):
        """Linear's scale: 0 means none, and sorts after the four real ones."""

        NONE = 0
        URGENT = 1
        HIGH = 2
        MEDIUM = 3
        LOW = 4

    # Closing releases the lease and file claims; a closed issue cannot be leased.
    CLOSED_STATUSES = frozenset({Status.DONE, Status.CANCELLED})
    # Entering these needs a completion report once the issue has ever been leased.
    REPORTED_STATUSES = frozenset({Status.IN_REVIEW, Status.DONE})

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="issues")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="issues")
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.BACKLOG)
    priority = models.PositiveSmallIntegerField(
        choices=Priority.choices, default=Priority.NONE, db_default=Priority.NONE
    )
    # {"summary", "verification", "pr_link"?}: what the worker says it did and how it checked.
    report = models.JSONField(null=True, blank=True, editable=False)
    requires_filesystem = models.BooleanField(default=False)
    worktree = models.ForeignKey(
        Worktree, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    assignee = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_issues"
    )
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["workspace", "project", "status"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"


class HolderQuerySet(models.QuerySet[Any]):
    """Leases, file claims and worktree locks: rows held by a session until released.

    They have no expiry of their own (invariant 4): a row is live while it is
    unreleased and its holder session is live. This is the one place that says so.
    """

    def unreleased(self) -> Self:
        return self.filter(released_at__isnull=True)

    def live(self) -> Self:
        return self.unreleased().filter(live_q("session__"))

    def with_live(self) -> Self:
        """``is_live`` on each row: unreleased, and its holder session is live."""
        return self.annotate(
            is_live=Case(
                When(Q(released_at__isnull=True) & live_q("session__"), then=True),
                default=False,
            )
        )


class IssueLease(models.Model):
    """Exclusive ownership of one issue by one session (invariant 2).

    It has no expiry of its own: it is live while its holder session is.
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    issue = models.ForeignKey(Issue, on_delete=models.CASCADE, related_name="leases")
    session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="leases"
    )
    agent = models.ForeignKey(Agent, null=True, on_delete=models.SET_NULL, related_name="+")
    acquired_at = models.DateTimeField(db_default=DbNow(), editable=False)
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.CharField(max_length=32, choices=ReleaseReason.choices, blank=True)
    # Grows with each new lease of the issue and is never reused (API.md, Fences):
    # the services number it in the insert (leases.insert_lease_within_cap); the
    # default serves only rows made directly through the ORM (fixtures).
    fence = models.PositiveIntegerField(default=1, editable=False)

    objects = HolderQuerySet.as_manager()

    class Meta:
        db_table = "issue_leases"  # the original schema's name (DESIGN.md)
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "issue"],
                condition=Q(released_at__isnull=True),
                name="one_unreleased_lease_per_issue",
            ),
            # "Never reused", proved by the database.
            models.UniqueConstraint(fields=["issue", "fence"], name="lease_fence_unique"),
        ]
        indexes = [models.Index(fields=["workspace", "session", "released_at"])]

    def __str__(self) -> str:
        return f"lease {self.pk} on issue {self.issue_id}"


class WipCapDenial(models.Model):
    """Append-only: a claim the WIP cap refused (invariants 3 and 8)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    issue = models.ForeignKey(Issue, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    agent = models.ForeignKey(Agent, null=True, on_delete=models.SET_NULL, related_name="+")
    limit = models.PositiveIntegerField()
    occurred_at = models.DateTimeField(db_default=DbNow(), editable=False)

    class Meta:
        db_table = "wip_cap_denials"  # the original schema's name (DESIGN.md)
        verbose_name = "WIP cap denial"
        indexes = [models.Index(fields=["workspace", "occurred_at"])]

    def __str__(self) -> str:
        return f"WIP denial on issue {self.issue_id}"


class FileClaim(models.Model):
    """Reservation of one literal, normalised path against an issue (invariants 5, 6).

    ``session`` is NULL when claimed without one, or orphaned by a deleted session:
    such a claim has no heartbeat and is held until forced.
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    issue = models.ForeignKey(Issue, on_delete=models.CASCADE, related_name="file_claims")
    session = models.ForeignKey(
        AgentSession, null=True, blank=True, on_delete=models.SET_NULL, related_name="file_claims"
    )
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    path = models.CharField(max_length=1024)
    claimed_at = models.DateTimeField(db_default=DbNow(), editable=False)
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.CharField(max_length=32, choices=ReleaseReason.choices, blank=True)

    objects = HolderQuerySet.as_manager()

    class Meta:
        db_table = "issue_file_claims"  # the original schema's name (DESIGN.md)
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "path"],
                condition=Q(released_at__isnull=True),
                name="one_unreleased_claim_per_path",
            )
        ]
        indexes = [
            models.Index(fields=["workspace", "claimed_at"]),
            models.Index(fields=["workspace", "issue", "released_at"]),
        ]

    def __str__(self) -> str:
        return self.path


class ClaimConflict(models.Model):
    """Append-only: one contested path of one file-claim request (invariants 5, 8)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    path = models.CharField(max_length=1024)
    rejected_issue = models.ForeignKey(Issue, on_delete=models.CASCADE, related_name="+")
    rejected_session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    rejected_agent = models.ForeignKey(
        Agent, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    holding_issue = models.ForeignKey(Issue, on_delete=models.CASCADE, related_name="+")
    holding_session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    holding_agent = models.ForeignKey(Agent, null=True, on_delete=models.SET_NULL, related_name="+")
    forced = models.BooleanField(default=False)
    occurred_at = models.DateTimeField(db_default=DbNow(), editable=False)

    class Meta:
        db_table = "claim_conflicts"  # the original schema's name (DESIGN.md)
        indexes = [
            models.Index(fields=["workspace", "occurred_at"]),
            models.Index(fields=["workspace", "path"]),
        ]

    def __str__(self) -> str:
        return f"conflict on {self.path}"


class Message(models.Model):
    """A post to a scope: ``issue:<id>``, ``agent:<name>`` or ``project:<key>``."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=200)
    body = models.TextField()
    session = models.ForeignKey(AgentSession, null=True, blank=True, on_delete=models.SET_NULL)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)

    class Meta:
        indexes = [models.Index(fields=["workspace", "scope", "created_at"])]

    def __str__(self) -> str:
        return f"message to {self.scope}"


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


class WorktreeLock(models.Model):
    """The exclusive lock a run holds on a worktree; live while its holder session is."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    worktree = models.ForeignKey(Worktree, on_delete=models.CASCADE, related_name="locks")
    session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="worktree_locks"
    )
    run = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="locks")
    acquired_at = models.DateTimeField(db_default=DbNow(), editable=False)
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.CharField(max_length=32, choices=ReleaseReason.choices, blank=True)
    # Grows with each new lock of the worktree and is never reused (API.md, Fences):
    # numbered in the insert (worktrees.insert_lock); the default serves only rows
    # made directly through the ORM (fixtures).
    fence = models.PositiveIntegerField(default=1, editable=False)

    objects = HolderQuerySet.as_manager()

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
