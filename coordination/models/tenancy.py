"""The tenant and its API keys (invariant 9 (workspace isolation): every row carries its
workspace)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models

from coordination.liveness import DbNow

if TYPE_CHECKING:
    from coordination.models.tracker import Agent

# Ids are bigint: the largest one that exists, so an input past it is refused early.
MAX_ID = 2**63 - 1


class Workspace(models.Model):
    """The tenant: every query is scoped by it (invariant 9 (workspace isolation))."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="projektor_workspaces"
    )
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)
    # The highest event id ``prune_events`` deleted: a cursor below it has missed events.
    events_pruned_through = models.BigIntegerField(default=0, editable=False)

    def __str__(self) -> str:
        return self.slug


class KeyRingVersion(models.Model):
    """How many times a workspace's key ring changed: an update or a deletion of one of
    its keys or agents, or of the workspace itself. Database triggers (migration 0018)
    bump it in the changing transaction, so an app server that cached a key
    (``services.keys``) learns on the key's next request that its copy is stale. No
    foreign key: the triggers write it while Django deletes a workspace's rows."""

    workspace_id = models.BigIntegerField(primary_key=True)
    version = models.BigIntegerField(default=0)

    class Meta:
        db_table = "coordination_key_ring_version"

    def __str__(self) -> str:
        return f"workspace {self.workspace_id}: {self.version}"


def hash_api_key(raw_key: str) -> str:
    # Keys are 256-bit random tokens, so a plain digest is enough (no stretching).
    return hashlib.sha256(raw_key.encode()).hexdigest()


class ApiKey(models.Model):
    """A workspace's bearer key, and who it acts as (invariant 13 (the key is the actor)): a
    ``fleet`` key acts for any agent, an ``agent`` key as its one agent, a ``read`` key never
    writes. Only its hash is stored; revoking is a timestamp, and so is expiring."""

    PREFIX = "pk_"

    class Kind(models.TextChoices):
        FLEET = "fleet"
        AGENT = "agent"
        READ = "read"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    key_prefix = models.CharField(max_length=12, help_text="First characters, to recognise it.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.FLEET)
    # The one agent an agent key acts as (and only then); it goes with its agent.
    agent = models.ForeignKey(
        "coordination.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="api_keys",
    )
    can_force = models.BooleanField(
        default=True, help_text="May take file claims from their holders (force)."
    )
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="From then on the key is refused, as if revoked."
    )

    class Meta:
        verbose_name = "API key"
        constraints = [
            # An agent key names its agent; no other kind does. A read key never forces.
            models.CheckConstraint(
                condition=(
                    models.Q(kind="agent", agent__isnull=False)
                    | models.Q(kind="fleet", agent__isnull=True)
                    | models.Q(kind="read", agent__isnull=True, can_force=False)
                ),
                name="api_key_kind_agent",
            )
        ]

    def __str__(self) -> str:
        return f"{self.key_prefix}… ({self.workspace})"

    @classmethod
    def issue(
        cls,
        workspace: Workspace,
        name: str = "",
        *,
        kind: str = Kind.FLEET,
        agent: Agent | None = None,
        can_force: bool | None = None,
        expires_at: datetime | None = None,
    ) -> tuple[ApiKey, str]:
        """Create a key; the raw key is returned once and never stored. ``can_force``
        defaults to true for a fleet key, false for the others."""
        raw = cls.PREFIX + secrets.token_urlsafe(32)
        key = cls.objects.create(
            workspace=workspace,
            name=name,
            key_prefix=raw[:10],
            key_hash=hash_api_key(raw),
            kind=kind,
            agent=agent,
            can_force=(kind == cls.Kind.FLEET) if can_force is None else can_force,
            expires_at=expires_at,
        )
        return key, raw
