"""Resources: counted things that no path names (a test database, a pool of ports, the
migration head), held in units by sessions (invariant 20 (resources are counted))."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from coordination.liveness import DbNow
from coordination.models.holdings import Holding
from coordination.models.tenancy import Workspace
from coordination.models.tracker import Agent, AgentSession, Issue

NAME_PATTERN = r"^[a-z0-9][a-z0-9._:-]{0,63}$"
MAX_CAPACITY = 10_000


class Resource(models.Model):
    """A named thing with ``capacity`` units, unique in its workspace. What is in use is
    derived from its live holds, never stored (invariant 1 (liveness))."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(
        max_length=64,
        validators=[
            RegexValidator(
                NAME_PATTERN,
                "1 to 64 of a-z, 0-9 and . _ : -, starting with a letter or a digit.",
            )
        ],
    )
    capacity = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_CAPACITY)]
    )
    description = models.TextField(blank=True, max_length=2000)
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="resource_name_unique"),
            models.CheckConstraint(
                condition=Q(capacity__gte=1) & Q(capacity__lte=MAX_CAPACITY),
                name="resource_capacity_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ResourceHold(Holding):
    """Units of a resource held by a session, each a distinct slot number in
    ``0 .. capacity-1``; live exactly as a lease is (``HolderQuerySet``), fenced per
    resource, released with a reason (invariant 7 (release reasons))."""

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    resource = models.ForeignKey(Resource, on_delete=models.CASCADE, related_name="holds")
    session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="resource_holds"
    )
    agent = models.ForeignKey(Agent, null=True, on_delete=models.SET_NULL, related_name="+")
    issue = models.ForeignKey(
        Issue, null=True, blank=True, on_delete=models.SET_NULL, related_name="resource_holds"
    )
    units = models.PositiveIntegerField()
    slots = models.JSONField(default=list)

    is_live: bool  # annotated by ``with_live()``

    class Meta:
        constraints = [
            # "Never reused", proved by the database.
            models.UniqueConstraint(fields=["resource", "fence"], name="resource_fence_unique"),
            # One unreleased hold per session and resource: a second acquire answers it.
            models.UniqueConstraint(
                fields=["resource", "session"],
                condition=Q(released_at__isnull=True),
                name="one_unreleased_hold_per_session",
            ),
        ]
        indexes = [
            models.Index(fields=["workspace", "session", "released_at"]),
            models.Index(
                fields=["resource", "released_at"],
                condition=Q(released_at__isnull=True),
                name="unreleased_holds_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.resource.name} · hold {self.pk}"


class ResourceWait(models.Model):
    """A call waiting for units, in the line of its resource: first come (lowest id),
    first served. It is in the line while its deadline is ahead and its session is live;
    the call deletes it when it answers (a row left by a server that died ages out)."""

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    resource = models.ForeignKey(Resource, on_delete=models.CASCADE, related_name="waits")
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="+")
    units = models.PositiveIntegerField()
    since = models.DateTimeField(db_default=DbNow(), editable=False)
    deadline = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["resource", "id"], name="resource_line_idx")]

    def __str__(self) -> str:
        return f"wait {self.pk} for {self.units} of resource {self.resource_id}"
