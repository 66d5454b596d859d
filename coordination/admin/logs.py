"""The contention logs: append-only (invariant 8), so the admin only reads them."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from coordination import models as m


class AppendOnlyAdmin(admin.ModelAdmin):
    """The contention logs are never edited or deleted (invariant 8)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(m.WipCapDenial)
class WipCapDenialAdmin(AppendOnlyAdmin):
    list_display = ["occurred_at", "project", "issue", "agent", "limit"]
    list_filter = ["workspace", "project"]
    list_select_related = ["project", "issue", "agent"]


@admin.register(m.ClaimConflict)
class ClaimConflictAdmin(AppendOnlyAdmin):
    list_display = ["occurred_at", "path", "rejected_issue", "holding_issue", "forced"]
    list_filter = ["workspace", "forced"]
    list_select_related = ["rejected_issue", "holding_issue"]
    search_fields = ["path"]
