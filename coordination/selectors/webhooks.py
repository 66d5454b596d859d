"""Webhooks and their deliveries."""

from django.db.models import OuterRef, QuerySet, Subquery

from coordination.models import Event, Webhook, WebhookDelivery, Workspace


def webhooks(workspace: Workspace) -> QuerySet[Webhook]:
    return Webhook.objects.filter(workspace=workspace).order_by("id")


def webhook_deliveries(webhook: Webhook, *, state: str | None = None) -> QuerySet[WebhookDelivery]:
    """Newest first, each with its event's type (a subquery, not a join: a pruned
    event leaves its delivery listed, with no type)."""
    rows = WebhookDelivery.objects.filter(webhook=webhook)
    if state is not None:
        rows = rows.filter(state=state)
    event_type = Event.objects.filter(pk=OuterRef("event_id")).values("type")[:1]
    return rows.annotate(event_type=Subquery(event_type)).order_by("-id")
