"""The tracker's own data: workspaces, keys, projects, issues, agents, worktrees, messages."""

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from coordination import models as m
from coordination.errors import CoordinationError
from coordination.services import workflow


@admin.register(m.Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["members"]


@admin.register(m.ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["key_prefix", "workspace", "name", "created_at", "revoked_at"]
    list_filter = ["workspace"]
    list_select_related = ["workspace"]
    fields = ["workspace", "name", "key_prefix", "revoked_at"]
    readonly_fields = ["key_prefix"]
    actions = ["revoke"]

    def save_model(self, request: HttpRequest, obj: m.ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        key, raw = m.ApiKey.issue(obj.workspace, obj.name)
        obj.pk, obj.key_prefix = key.pk, key.key_prefix
        self.message_user(request, f"New API key (shown once): {raw}", messages.WARNING)

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[m.ApiKey]) -> None:
        queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


@admin.register(m.Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["key", "name", "workspace", "agent_wip_limit", "primary_worktree"]
    list_filter = ["workspace"]
    list_select_related = ["workspace", "primary_worktree"]
    search_fields = ["key", "name"]


@admin.register(m.Issue)
class IssueAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "project", "status", "requires_filesystem", "assignee"]
    list_filter = ["workspace", "status", "requires_filesystem", "project"]
    list_select_related = ["project", "assignee"]
    search_fields = ["title", "description"]
    readonly_fields = ["status"]
    actions = ["mark_done"]

    @admin.action(description="Pass review: mark selected issues done")
    def mark_done(self, request: HttpRequest, queryset: QuerySet[m.Issue]) -> None:
        for issue in queryset.select_related("workspace"):
            try:
                workflow.transition_issue(
                    workspace=issue.workspace, issue_id=issue.pk, to="done", by_human=True
                )
            except CoordinationError as error:
                self.message_user(request, f"#{issue.pk}: {error.detail}", messages.ERROR)


@admin.register(m.Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "workspace", "role", "department", "worktree"]
    list_filter = ["workspace", "role", "department"]
    search_fields = ["name", "role"]


@admin.register(m.Worktree)
class WorktreeAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "workspace", "path", "branch"]
    list_filter = ["workspace"]
    search_fields = ["slug", "name", "path"]


@admin.register(m.Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["scope", "agent", "created_at"]
    list_filter = ["workspace"]
    search_fields = ["scope", "body"]
