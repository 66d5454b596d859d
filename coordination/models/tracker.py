"""The issue tracker: worktrees, projects, agents and their sessions, issues, messages."""

from __future__ import annotations

from django.db import models
from django.db.models import Case, F, Func, IntegerField, Q, Value, When
from django.db.models.functions import Trim
from django.db.models.lookups import Exact

from coordination.liveness import DbNow, live_q, stalled_q
from coordination.models.tenancy import Workspace


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
    # A lease older than this, counted from its grant, is not live (invariant 17 (stalled is
    # derived)); None: no cap.
    max_lease_age_seconds = models.PositiveIntegerField(null=True, blank=True)
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
            models.CheckConstraint(
                condition=Q(max_lease_age_seconds__isnull=True) | Q(max_lease_age_seconds__gte=1),
                name="project_max_lease_age_positive",
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

    def stalled(self) -> AgentSessionQuerySet:
        return self.filter(stalled_q())

    def with_live(self) -> AgentSessionQuerySet:
        """``is_live`` and ``is_stalled`` on each session, judged by the database."""
        return self.annotate(
            is_live=Case(When(live_q(), then=True), default=False),
            is_stalled=Case(When(stalled_q(), then=True), default=False),
        )


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
    # The key that opened it (invariant 13 (the key is the actor)); none for a session opened by a
    # person.
    api_key = models.ForeignKey(
        "coordination.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Its last change of state (invariant 17 (stalled is derived)): set at registration and, in the
    # same transaction, by every change it makes (the event log's progress trigger) and by
    # POST /sessions/{id}/progress/. Never by a heartbeat.
    last_progress_at = models.DateTimeField(db_default=DbNow(), editable=False)
    progress_note = models.CharField(max_length=500, blank=True, default="", db_default="")
    # The ``last_progress_at`` whose stall was announced (``session.stalled``): once per stall.
    stall_announced_for = models.DateTimeField(null=True, blank=True, editable=False)

    objects = AgentSessionQuerySet.as_manager()

    class Meta:
        db_table = "agent_sessions"  # the original schema's name (docs/design.md)
        indexes = [
            # "Live sessions of a workspace" is a range scan on active rows only.
            models.Index(
                fields=["workspace", "last_heartbeat_at"],
                condition=Q(status="active"),
                name="session_active_heartbeat_idx",
            ),
            # Stalled sessions are a range of active rows' progress (invariant 17 (stalled is
            # derived)).
            models.Index(
                fields=["workspace", "last_progress_at"],
                condition=Q(status="active"),
                name="session_active_progress_idx",
            ),
        ]

    def __str__(self) -> str:
        # Names its agent: lists showing sessions select ``agent`` with them.
        return f"{self.agent.name} · session {self.pk}"


# The ready queue's partial index ``issue_ready_queue_idx`` is built on READY and
# READY_RANK; the queue's statements (``coordination.db.sql.queue``) repeat
# them word for word, so that the database reads the queue off the index in order
# instead of sorting every open issue (a test asserts the plan). READY: in ``todo``,
# meeting the definition of ready (a title and a description that are not blank).
# READY_RANK: urgent (1) first, then 2, 3, 4, and none (0) last; written with literal
# numbers, not parameters, because SQLite matches an ORDER BY to an index's
# expression only when the two are the same text (a bound ``?`` is not the index's
# ``5``).
READY = (
    Q(status="todo")
    & ~Q(Exact(Trim("title"), Value("")))
    & ~Q(Exact(Trim("description"), Value("")))
)
READY_RANK = Func(
    F("priority"),
    template="CASE WHEN %(expressions)s = 0 THEN 5 ELSE %(expressions)s END",
    output_field=IntegerField(),
)


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
    # db_default: a row inserted without it (a raw INSERT, a bulk load) needs no filesystem.
    requires_filesystem = models.BooleanField(default=False, db_default=False)
    worktree = models.ForeignKey(
        Worktree, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    assignee = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_issues"
    )
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["workspace", "project", "status"]),
            # The ready queue in its order, ready issues only (READY above).
            models.Index(
                F("workspace"),
                READY_RANK,
                F("created_at"),
                F("id"),
                condition=READY,
                name="issue_ready_queue_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"


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
