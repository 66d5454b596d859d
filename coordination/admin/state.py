"""The base of every admin of coordination state and logs: rows only the services
write, shown read-only (no add, no edit, no delete, for superusers too)."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest


class StateAdmin(admin.ModelAdmin):
    """Read-only rows of coordination state, changed only by actions."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
