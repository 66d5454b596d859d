"""The tenant and its API keys (invariant 9: every row carries its workspace)."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models

from coordination.liveness import DbNow

# Ids are bigint: the largest one that exists, so an input past it is refused early.
MAX_ID = 2**63 - 1


class Workspace(models.Model):
    """The tenant: every query is scoped by it (invariant 9)."""

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
