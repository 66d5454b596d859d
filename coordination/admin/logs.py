"""The contention logs: append-only (invariant 8), so the admin only reads them."""

from django.contrib import admin

from coordination import models as m
from coordination.admin.fleet import StateAdmin


class AppendOnlyAdmin(StateAdmin):
    """Never added, edited or deleted here: the services append, everyone reads."""


@admin.register(m.WipCapDenial)
class WipCapDenialAdmin(AppendOnlyAdmin):
    list_display = ["occurred_at", "project", "issue", "agent", "session", "limit"]
    list_filter = ["project", "workspace"]
    list_select_related = ["project", "issue", "agent", "session"]
    search_fields = ["issue__title", "=issue__id", "agent__name", "project__key"]
    date_hierarchy = "occurred_at"


@admin.register(m.ClaimConflict)
class ClaimConflictAdmin(AppendOnlyAdmin):
    list_display = [
        "occurred_at",
        "path",
        "rejected_issue",
        "rejected_agent",
        "holding_issue",
        "holding_agent",
        "forced",
    ]
    list_filter = ["forced", "rejected_issue__project", "workspace"]
    list_select_related = ["rejected_issue", "rejected_agent", "holding_issue", "holding_agent"]
    search_fields = [
        "path",
        "rejected_issue__title",
        "holding_issue__title",
        "rejected_agent__name",
        "holding_agent__name",
    ]
    date_hierarchy = "occurred_at"
