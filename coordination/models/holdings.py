"""What sessions hold and what the logs keep: leases, file claims, the append-only logs."""

from __future__ import annotations

from typing import Any, Self

from django.db import models
from django.db.models import Case, Q, When

from coordination.liveness import DbNow, live_q, young_q
from coordination.models.tenancy import Workspace
from coordination.models.tracker import Agent, AgentSession, Issue, Project


class ReleaseReason(models.TextChoices):
    """Why a lease, file claim or worktree lock ended (invariant 7 (release reasons))."""

    RELEASED = "released"
    AGENT_ENDED = "agent_ended"
    EXPIRED = "expired"
    OVERRIDDEN = "overridden"
    ISSUE_CLOSED = "issue_closed"
    WORKTREE_UNRESOLVED = "worktree_unresolved"
    # A lease past its project's age cap, its holder live (invariant 17 (stalled is derived)).
    MAX_AGE = "max_age"


class HolderQuerySet(models.QuerySet[Any]):
    """Leases, file claims and worktree locks: rows held by a session until released.

    They have no expiry of their own (invariant 4 (stale reclaim)): a row is live while it is
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


class LeaseQuerySet(HolderQuerySet):
    """A lease is live as any holding, and younger than its project's age cap
    (invariant 17 (stalled is derived)): ``ages_out_at``, its grant plus the cap, is in
    the future."""

    def live(self) -> Self:
        return super().live().filter(young_q())

    def with_live(self) -> Self:
        """``is_live``, and ``aged_out``: unreleased and past its project's cap."""
        unreleased = Q(released_at__isnull=True)
        live = unreleased & live_q("session__") & young_q()
        return self.annotate(
            is_live=Case(When(live, then=True), default=False),
            aged_out=Case(When(unreleased & ~young_q(), then=True), default=False),
        )


class Holding(models.Model):
    """What a session holds exclusively, fenced: a lease of an issue, a lock of a
    worktree. It has no expiry of its own: it is live while it is unreleased and its
    holder session is live (``HolderQuerySet``). The subclasses name what is held
    and by whom (``session``, each with its own reverse name). File claims are held
    too, but unfenced and stamped ``claimed_at``: they share the queryset only.
    """

    acquired_at = models.DateTimeField(db_default=DbNow(), editable=False)
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.CharField(max_length=32, choices=ReleaseReason.choices, blank=True)
    # Grows with each new holding of the same thing and is never reused (docs/api.md,
    # Fences): the services number it in the insert (leases.insert_lease_within_cap,
    # worktrees.insert_lock); the default serves only rows made directly through the
    # ORM (fixtures).
    fence = models.PositiveIntegerField(default=1, editable=False)

    objects = HolderQuerySet.as_manager()

    class Meta:
        abstract = True


class IssueLease(Holding):
    """Exclusive ownership of one issue by one session (invariant 2 (one live lease per issue))."""

    # Every index of the table starts with it: no index of its own (one less per write).
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    issue = models.ForeignKey(Issue, on_delete=models.CASCADE, related_name="leases")
    session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="leases"
    )
    agent = models.ForeignKey(Agent, null=True, on_delete=models.SET_NULL, related_name="+")
    # Its grant plus its project's ``max_lease_age_seconds`` (None: no cap), written by
    # the claim's insert and again when the project's cap changes: past it the lease
    # is not live (invariant 17 (stalled is derived)).
    ages_out_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = LeaseQuerySet.as_manager()  # type: ignore[misc]  # a narrower queryset

    class Meta:
        db_table = "issue_leases"  # the original schema's name (docs/design.md)
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "issue"],
                condition=Q(released_at__isnull=True),
                name="one_unreleased_lease_per_issue",
            ),
            # "Never reused", proved by the database.
            models.UniqueConstraint(fields=["issue", "fence"], name="lease_fence_unique"),
        ]
        indexes = [
            models.Index(fields=["workspace", "session", "released_at"]),
            # The health page's releases per day: a range over the window, not the history.
            models.Index(
                fields=["workspace", "released_at", "release_reason"],
                condition=Q(released_at__isnull=False),
                name="lease_releases_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"lease {self.pk} on issue {self.issue_id}"


class WipCapDenial(models.Model):
    """Append-only: a claim the WIP cap refused (invariants 3 (the WIP cap) and 8
    (append-only logs))."""

    # Every index of the table starts with it: no index of its own (one less per write).
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    issue = models.ForeignKey(Issue, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    agent = models.ForeignKey(Agent, null=True, on_delete=models.SET_NULL, related_name="+")
    limit = models.PositiveIntegerField()
    occurred_at = models.DateTimeField(db_default=DbNow(), editable=False)

    class Meta:
        db_table = "wip_cap_denials"  # the original schema's name (docs/design.md)
        verbose_name = "WIP cap denial"
        indexes = [models.Index(fields=["workspace", "occurred_at"])]

    def __str__(self) -> str:
        return f"WIP denial on issue {self.issue_id}"


class FileClaim(models.Model):
    """Reservation of one literal, normalised path against an issue (invariants 5
    (all-or-nothing) and 6 (paths are literal)).

    ``session`` is NULL when claimed without one, or orphaned by a deleted session:
    such a claim has no heartbeat and is held until forced.
    """

    # Every index of the table starts with it: no index of its own (one less per write).
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # Indexed with the time (below): an issue's claims in a window are one range.
    issue = models.ForeignKey(
        Issue, on_delete=models.CASCADE, related_name="file_claims", db_index=False
    )
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
        db_table = "issue_file_claims"  # the original schema's name (docs/design.md)
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
            # As the leases': a claim is written without it, its release adds one entry.
            models.Index(
                fields=["workspace", "released_at", "release_reason"],
                condition=Q(released_at__isnull=False),
                name="file_claim_releases_idx",
            ),
            # The board's claims of an issue in the window.
            models.Index(fields=["issue", "claimed_at"], name="file_claims_of_issue_idx"),
        ]

    def __str__(self) -> str:
        return self.path


class ClaimConflict(models.Model):
    """Append-only: one contested path of one file-claim request (invariants 5
    (all-or-nothing) and 8 (append-only logs))."""

    # Every index of the table starts with it: no index of its own (one less per write).
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    path = models.CharField(max_length=1024)
    # Both issues are indexed with the time (below), as the claims' issue is.
    rejected_issue = models.ForeignKey(
        Issue, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    rejected_session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    rejected_agent = models.ForeignKey(
        Agent, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    holding_issue = models.ForeignKey(
        Issue, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    holding_session = models.ForeignKey(
        AgentSession, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    holding_agent = models.ForeignKey(Agent, null=True, on_delete=models.SET_NULL, related_name="+")
    forced = models.BooleanField(default=False)
    occurred_at = models.DateTimeField(db_default=DbNow(), editable=False)

    class Meta:
        db_table = "claim_conflicts"  # the original schema's name (docs/design.md)
        indexes = [
            # By time, with what the health page's series count (index-only reads).
            models.Index(
                fields=["workspace", "occurred_at", "forced"], name="conflicts_by_time_idx"
            ),
            models.Index(fields=["workspace", "path"]),
            # The board's conflicts of an issue in the window, on either side: each
            # side counted from its index alone (the other issue tells them apart).
            models.Index(
                fields=["rejected_issue", "occurred_at", "holding_issue"],
                name="conflicts_rejected_idx",
            ),
            models.Index(
                fields=["holding_issue", "occurred_at", "rejected_issue"],
                name="conflicts_holding_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"conflict on {self.path}"
