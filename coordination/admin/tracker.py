"""The tracker's own data: workspaces, keys, projects, issues, agents, worktrees, messages."""

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from coordination import models as m
from coordination.admin import forms
from coordination.admin.reporting import report
from coordination.services import logs, operators, workflow


class KeptAdmin(admin.ModelAdmin):
    """Rows that coordination state points at are never deleted here: deleting an
    issue would erase its contention log, an agent its sessions (orphaning their
    leases), a worktree its locks. Issues are cancelled instead; a whole tenant
    goes by deleting its workspace."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(m.Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["members"]

    # A tenant goes with its append-only logs: only through the one door that allows it.
    def delete_model(self, request: HttpRequest, obj: m.Workspace) -> None:
        logs.delete_workspace(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[m.Workspace]) -> None:
        for workspace in queryset:
            logs.delete_workspace(workspace)


@admin.register(m.ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["key_prefix", "workspace", "name", "created_at", "revoked_at"]
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

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[m.ApiKey]) -> None:
        report(self, request, "Revoked", operators.revoke_api_keys(keys=queryset))


@admin.register(m.Project)
class ProjectAdmin(KeptAdmin):
    form = forms.ProjectAdminForm
    list_display = ["key", "name", "workspace", "agent_wip_limit", "primary_worktree"]
    list_filter = ["workspace"]
    list_select_related = ["workspace", "primary_worktree"]
    search_fields = ["key", "name"]


def transition_action(to: str) -> Callable[..., None]:
    """An action moving the selected issues to ``to`` through the workflow, as a
    person: the human review gate passes here; every other rule still holds."""

    def move(model_admin: admin.ModelAdmin, request: HttpRequest, queryset: Any) -> None:
        report(
            model_admin,
            request,
            f"Moved to {to}",
            operators.transition_issues(issues=queryset, to=to),
        )

    move.__name__ = f"move_to_{to}"
    gate = " (passes the review gate)" if to == m.Issue.Status.DONE else ""
    return admin.action(description=f"Move selected issues to {to}{gate}")(move)


@admin.register(m.Issue)
class IssueAdmin(KeptAdmin):
    form = forms.IssueAdminForm
    list_display = [
        "id",
        "title",
        "project",
        "status",
        "priority",
        "requires_filesystem",
        "assignee",
    ]
    list_filter = ["status", "priority", "project", "requires_filesystem", "workspace"]
    list_select_related = ["project", "assignee"]
    search_fields = ["title", "description"]
    # Status moves only by the transition actions; the report is the worker's word.
    readonly_fields = ["status", "completion_report"]
    actions = [transition_action(status) for status in m.Issue.Status]

    @admin.display(description="completion report")
    def completion_report(self, obj: m.Issue) -> str:
        if not obj.report:
            return "—"
        return workflow.report_message(obj.report)


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
    list_display = ["slug", "name", "workspace", "path", "branch"]
    list_filter = ["workspace"]
    list_select_related = ["workspace"]
    search_fields = ["slug", "name", "path"]


@admin.register(m.Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["created_at", "scope", "agent", "excerpt"]
    list_filter = ["workspace"]
    list_select_related = ["agent"]
    search_fields = ["scope", "body", "agent__name"]
    date_hierarchy = "created_at"

    @admin.display(description="body")
    def excerpt(self, obj: m.Message) -> str:
        return obj.body if len(obj.body) <= 90 else obj.body[:89] + "…"
