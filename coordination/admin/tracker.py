"""The tracker's own data: workspaces, keys, projects, agents, worktrees, messages
(issues have a module of their own)."""

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString

from coordination import models as m
from coordination.admin import display, forms
from coordination.admin.reporting import report
from coordination.services import logs, operators


class KeptAdmin(admin.ModelAdmin):
    """Rows that coordination state points at are never deleted here: deleting an
    issue would erase its contention log, an agent its sessions (orphaning their
    leases), a worktree its locks. Issues are cancelled instead; a whole tenant
    goes by deleting its workspace."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(m.Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["members"]

    # A tenant goes with its append-only logs: only through the one door that allows it.
    def delete_model(self, request: HttpRequest, obj: m.Workspace) -> None:
        logs.delete_workspace(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[m.Workspace]) -> None:
        for workspace in queryset:
            logs.delete_workspace(workspace)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: m.Workspace) -> SafeString | str:
        return display.when(obj.created_at)


@admin.register(m.ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["key_prefix", "workspace", "name", "created", "revoked"]
    list_filter = ["workspace"]
    list_select_related = ["workspace"]
    fields = ["workspace", "name", "key_prefix", "created_at", "revoked_at"]
    search_fields = ["name", "key_prefix"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Revoking is the action's job; a key never moves to another workspace.
        frozen = ["key_prefix", "created_at", "revoked_at"]
        return ["workspace", *frozen] if obj is not None else frozen

    def save_model(self, request: HttpRequest, obj: m.ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        key, raw = m.ApiKey.issue(obj.workspace, obj.name)
        obj.pk, obj.key_prefix = key.pk, key.key_prefix
        self.message_user(request, f"New API key (shown once): {raw}", messages.WARNING)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: m.ApiKey) -> SafeString | str:
        return display.when(obj.created_at)

    @admin.display(description="revoked", ordering="revoked_at")
    def revoked(self, obj: m.ApiKey) -> SafeString | str:
        return display.when(obj.revoked_at)

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[m.ApiKey]) -> None:
        report(self, request, "Revoked", operators.revoke_api_keys(keys=queryset))


@admin.register(m.Project)
class ProjectAdmin(KeptAdmin):
    form = forms.ProjectAdminForm
    list_display = ["key", "name_cell", "workspace", "wip_cap", "primary_worktree"]
    list_filter = ["workspace"]
    list_select_related = ["workspace", "primary_worktree"]
    search_fields = ["key", "name"]

    @admin.display(description="name", ordering="name")
    def name_cell(self, obj: m.Project) -> SafeString | str:
        return display.clip(obj.name, 48)

    @admin.display(description="WIP cap", ordering="agent_wip_limit")
    def wip_cap(self, obj: m.Project) -> int:
        return obj.agent_wip_limit


@admin.register(m.Agent)
class AgentAdmin(KeptAdmin):
    form = forms.AgentAdminForm
    list_display = ["name", "workspace", "role", "department", "worktree"]
    list_filter = ["workspace", "role", "department"]
    list_select_related = ["workspace", "worktree"]
    search_fields = ["name", "role"]


@admin.register(m.Worktree)
class WorktreeAdmin(KeptAdmin):
    form = forms.WorktreeAdminForm
    list_display = ["slug", "name_cell", "workspace", "path_cell", "branch_cell"]
    list_filter = ["workspace"]
    list_select_related = ["workspace"]
    search_fields = ["slug", "name", "path"]

    @admin.display(description="name", ordering="name")
    def name_cell(self, obj: m.Worktree) -> SafeString | str:
        return display.clip(obj.name, 32)

    @admin.display(description="path", ordering="path")
    def path_cell(self, obj: m.Worktree) -> SafeString | str:
        return display.clip(obj.path, 44, keep_end=True)

    @admin.display(description="branch", ordering="branch")
    def branch_cell(self, obj: m.Worktree) -> SafeString | str:
        return display.clip(obj.branch, 24)


@admin.register(m.Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["created", "scope_cell", "agent", "excerpt"]
    list_filter = ["workspace"]
    list_select_related = ["agent"]
    search_fields = ["scope", "body", "agent__name"]
    date_hierarchy = "created_at"
    # A choice list of every session would cost a query per session (its label
    # names its agent) and thousands of options: a search box instead.
    autocomplete_fields = ["session", "agent"]

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: m.Message) -> SafeString | str:
        return display.when(obj.created_at)

    @admin.display(description="scope", ordering="scope")
    def scope_cell(self, obj: m.Message) -> SafeString | str:
        return display.clip(obj.scope, 24)

    @admin.display(description="body")
    def excerpt(self, obj: m.Message) -> str:
        return obj.body if len(obj.body) <= 160 else obj.body[:159] + "…"
