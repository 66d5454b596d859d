"""Webhooks: the event log pushed to a URL, one delivery per matching event
(docs/api.md, Webhooks)."""

from __future__ import annotations

from django.db import models

from coordination.liveness import DbNow
from coordination.models.events import Event
from coordination.models.tenancy import Workspace


class Webhook(models.Model):
    """A receiver of a workspace's events. ``cursor`` is the last event id already
    turned into deliveries: the worker reads the log after it (``coordination.feed``),
    so writing an event costs the agents nothing more."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=2000)
    # Event types to send; empty: every type.
    types = models.JSONField(default=list, blank=True)
    secret = models.CharField(max_length=200, help_text="Keys the HMAC-SHA256 signature.")
    active = models.BooleanField(default=True)
    deactivated_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)
    cursor = models.BigIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"webhook {self.pk} → {self.url}"

    def wants(self, event_type: str) -> bool:
        return not self.types or event_type in self.types


class WebhookDelivery(models.Model):
    """One event sent (or still to send) to one webhook. A webhook's deliveries go out
    in id order, which is event order: the lowest pending one is its head."""

    class State(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, db_constraint=False, related_name="+"
    )
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    # An id link only: pruning the log must not wait for (or cascade to) deliveries.
    event = models.ForeignKey(
        Event, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    first_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=DbNow(), editable=False)

    class Meta:
        verbose_name_plural = "webhook deliveries"
        ordering = ["-id"]
        constraints = [
            # Enqueueing twice (two workers, a retried enqueue) cannot send an event twice.
            models.UniqueConstraint(fields=["webhook", "event"], name="delivery_once"),
        ]
        indexes = [
            # The head of a webhook's queue, and its deliveries by state.
            models.Index(fields=["webhook", "state", "id"], name="delivery_queue"),
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk} of event {self.event_id}"
