"""Webhooks and their deliveries: webhooks are made and edited through the same
service as the API (the address check, the secret shown once); deliveries are the
worker's record, read-only, with a "redeliver" action."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from coordination import models as m
from coordination.admin import display
from coordination.admin.state import StateAdmin
from coordination.errors import InvalidInput
from coordination.services import webhooks


class WebhookAdminForm(forms.ModelForm):
    url = forms.CharField(max_length=2000, help_text="An http:// or https:// URL.")
    types = forms.MultipleChoiceField(
        choices=m.EventType.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every type.",
    )

    class Meta:
        model = m.Webhook
        fields = ["workspace", "url", "types", "active"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None and "workspace" in self.fields:
            self.fields["workspace"].disabled = True

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        try:
            webhooks.check_url(url)
        except InvalidInput as refused:
            raise ValidationError(refused.detail) from None
        return url


@admin.register(m.Webhook)
class WebhookAdmin(admin.ModelAdmin):
    form = WebhookAdminForm
    list_display = ["url_cell", "workspace_cell", "active", "reason_cell", "types_cell"]
    list_filter = ["active", "workspace"]
    list_select_related = ["workspace"]
    search_fields = ["url", "deactivated_reason"]
    readonly_fields = ["deactivated_reason", "created_at"]
    url_cell = display.clipped("url", 26, description="url")
    workspace_cell = display.clipped("workspace.slug", 12, description="workspace")
    reason_cell = display.clipped("deactivated_reason", 28, wrap=True, description="deactivated")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # Never the secret: it is shown once, when the webhook is added.
        base = ["workspace", "url", "types", "active"]
        return [*base, "deactivated_reason", "created_at"] if obj is not None else base

    @admin.display(description="types")
    def types_cell(self, obj: m.Webhook) -> SafeString | str:
        return display.clip(", ".join(obj.types) or "all", 20, wrap=True)

    def save_model(self, request: HttpRequest, obj: m.Webhook, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            changes = {name: data[name] for name in form.changed_data if name != "workspace"}
            webhooks.update_webhook(webhook=m.Webhook.objects.get(pk=obj.pk), changes=changes)
            return
        made = webhooks.create_webhook(
            workspace=data["workspace"], url=data["url"], types=data["types"], active=data["active"]
        )
        obj.pk = made.pk
        self.message_user(
            request, f"The webhook's secret (shown once): {made.secret}", messages.WARNING
        )


@admin.register(m.WebhookDelivery)
class WebhookDeliveryAdmin(StateAdmin):
    list_display = ["pk", "webhook_cell", "event_cell", "state_cell", "attempts", "last", "next"]
    list_filter = ["state", "webhook__active", "workspace"]
    search_fields = ["=id", "=event_id", "webhook__url", "last_error"]
    actions = ["redeliver"]
    next = display.dated("next_attempt_at", "next try")
    webhook_cell = display.clipped("webhook.url", 18, description="webhook")

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.WebhookDelivery]:
        event_type = m.Event.objects.filter(pk=OuterRef("event_id")).values("type")[:1]
        return (
            super()
            .get_queryset(request)
            .select_related("webhook")
            .annotate(event_type=Subquery(event_type))
        )

    @admin.display(description="event", ordering="event_id")
    def event_cell(self, obj: m.WebhookDelivery) -> SafeString:
        kind = getattr(obj, "event_type", None) or "pruned"
        # Squeezed, the type goes below the id.
        return format_html("{} · {}", obj.event_id, kind)

    @admin.display(description="state", ordering="state")
    def state_cell(self, obj: m.WebhookDelivery) -> SafeString:
        return format_html('<span class="state state-{}">{}</span>', obj.state, obj.state)

    @admin.display(description="last answer")
    def last(self, obj: m.WebhookDelivery) -> SafeString | str:
        told = obj.last_error or (f"HTTP {obj.last_status}" if obj.last_status else "")
        return display.clip(told, 18, wrap=True)

    @admin.action(description="Redeliver selected deliveries")
    def redeliver(self, request: HttpRequest, queryset: QuerySet[m.WebhookDelivery]) -> None:
        waiting = webhooks.redeliver(deliveries=queryset)
        count = queryset.count()
        self.message_user(request, f"Redelivering {count}: sent again in order.", messages.SUCCESS)
        if waiting:
            ids = ", ".join(str(row.pk) for row in waiting)
            self.message_user(
                request,
                f"Waiting for an inactive webhook ({ids}): activate it to send them.",
                messages.WARNING,
            )
