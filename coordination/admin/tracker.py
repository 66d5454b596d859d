"""The tracker's own data: workspaces, keys, projects, agents, worktrees, messages
(issues have a module of their own)."""

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from coordination import models as m
from coordination.admin import display, forms
from coordination.admin.reporting import report
from coordination.services import events, leases, logs, operators
from coordination.services.messages import announce_message


class KeptAdmin(admin.ModelAdmin):
    """Rows that coordination state points at are never deleted here: deleting an
    issue would erase its contention log, an agent its sessions (orphaning their
    leases), a worktree its locks. Issues are cancelled instead; a whole tenant
    goes by deleting its workspace."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(m.Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["slug_cell", "name_cell", "created"]
    search_fields = ["slug", "name"]
    slug_cell = display.clipped("slug", 32)
    name_cell = display.clipped("name", 48, wrap=True)
    created = display.dated("created_at", "created")
    filter_horizontal = ["members"]

    # A tenant goes with its append-only logs: only through the one door that allows it.
    def delete_model(self, request: HttpRequest, obj: m.Workspace) -> None:
        logs.delete_workspace(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[m.Workspace]) -> None:
        for workspace in queryset:
            logs.delete_workspace(workspace)


@admin.register(m.ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys and who they act as (invariant 13 (the key is the actor)): kind, agent, force and expiry
    are set when a key is added; an existing one is only renamed, re-dated or revoked."""

    form = forms.ApiKeyAdminForm
    list_display = [
        "key_prefix",
        "workspace_cell",
        "name_cell",
        "kind",
        "agent_cell",
        "force",
        "created",
        "expires",
        "revoked",
    ]
    list_filter = ["workspace", "kind", "can_force"]
    list_select_related = ["workspace", "agent"]
    search_fields = ["name", "key_prefix", "agent__name"]
    actions = ["revoke"]
    workspace_cell = display.clipped(
        "workspace.slug", display.WORKSPACE_WIDTH, description="workspace"
    )
    name_cell = display.clipped("name", 32, wrap=True)
    agent_cell = display.clipped("agent.name", display.AGENT_WIDTH, description="agent")
    created = display.dated("created_at", "created")
    expires = display.dated("expires_at", "expires")
    revoked = display.dated("revoked_at", "revoked")

    @admin.display(description="force", boolean=True, ordering="can_force")
    def force(self, obj: m.ApiKey) -> bool:
        return obj.can_force

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["workspace", "name", "kind", "agent", "force", "expires_at"]
        return [
            "workspace",
            "name",
            "kind",
            "agent",
            "can_force",
            "expires_at",
            "key_prefix",
            "created_at",
            "revoked_at",
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Revoking is the action's job; a key never moves to another workspace, nor
        # changes whom it acts as.
        frozen = ["key_prefix", "created_at", "revoked_at"]
        if obj is None:
            return frozen
        return ["workspace", "kind", "agent", "can_force", *frozen]

    def save_model(self, request: HttpRequest, obj: m.ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        data = form.cleaned_data
        key, raw = m.ApiKey.issue(
            obj.workspace,
            obj.name,
            kind=data["kind"],
            agent=data.get("agent"),
            can_force=data["can_force"],
            expires_at=data.get("expires_at"),
        )
        obj.pk, obj.key_prefix = key.pk, key.key_prefix
        self.message_user(request, f"New API key (shown once): {raw}", messages.WARNING)

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[m.ApiKey]) -> None:
        report(self, request, "Revoked", operators.revoke_api_keys(keys=queryset))


@admin.register(m.Project)
class ProjectAdmin(KeptAdmin):
    form = forms.ProjectAdminForm
    list_display = [
        "key_cell",
        "name_cell",
        "workspace_cell",
        "wip_cap",
        "age_cap",
        "worktree_cell",
    ]
    list_filter = ["workspace"]
    list_select_related = ["workspace", "primary_worktree"]
    search_fields = ["key", "name"]
    key_cell = display.clipped("key", 16)
    name_cell = display.clipped("name", 44, wrap=True)
    workspace_cell = display.clipped(
        "workspace.slug", display.WORKSPACE_WIDTH, description="workspace"
    )
    worktree_cell = display.clipped("primary_worktree.slug", 16, description="worktree")

    @admin.display(description="WIP cap", ordering="agent_wip_limit")
    def wip_cap(self, obj: m.Project) -> int:
        return obj.agent_wip_limit

    @admin.display(description="lease age cap", ordering="max_lease_age_seconds")
    def age_cap(self, obj: m.Project) -> str:
        cap = obj.max_lease_age_seconds
        return display.NONE if cap is None else f"{cap} s"

    def save_model(self, request: HttpRequest, obj: m.Project, form: Any, change: bool) -> None:
        # A changed age cap ages the leases held already, as the API's PATCH does
        # (invariant 17 (stalled is derived)), in the same transaction as the project's row.
        with events.change():
            super().save_model(request, obj, form, change)
            if change and "max_lease_age_seconds" in form.changed_data:
                leases.refresh_ages_out_at(project=obj)


@admin.register(m.Agent)
class AgentAdmin(KeptAdmin):
    form = forms.AgentAdminForm
    list_display = ["name_cell", "workspace_cell", "role_cell", "department_cell", "worktree_cell"]
    list_filter = ["workspace", "role", "department"]
    list_select_related = ["workspace", "worktree"]
    search_fields = ["name", "role"]
    name_cell = display.clipped("name", 28)
    workspace_cell = display.clipped(
        "workspace.slug", display.WORKSPACE_WIDTH, description="workspace"
    )
    role_cell = display.clipped("role", 20)
    department_cell = display.clipped("department", 20)
    worktree_cell = display.clipped("worktree.slug", 16, description="worktree")


@admin.register(m.Worktree)
class WorktreeAdmin(KeptAdmin):
    form = forms.WorktreeAdminForm
    list_display = ["slug_cell", "path_cell", "branch_cell", "workspace_cell"]
    list_filter = ["workspace"]
    list_select_related = ["workspace"]
    search_fields = ["slug", "name", "path"]
    workspace_cell = display.clipped(
        "workspace.slug", display.WORKSPACE_WIDTH, description="workspace"
    )
    path_cell = display.clipped("path", 32, keep_end=True)
    branch_cell = display.clipped("branch", 20)

    @admin.display(description="slug", ordering="slug")
    def slug_cell(self, obj: m.Worktree) -> SafeString:
        """The slug (a long one clipped), the whole of it and its name on hover."""
        shown = obj.slug if len(obj.slug) <= 20 else obj.slug[:19] + "…"
        return format_html(
            '<span class="nowrap" title="{}: {}">{}</span>', obj.slug, obj.name, shown
        )


@admin.register(m.Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["created", "scope_cell", "agent_cell", "excerpt"]
    list_filter = ["workspace"]
    list_select_related = ["agent"]
    search_fields = ["scope", "body", "agent__name"]
    date_hierarchy = "created_at"
    # A choice list of every session would cost a query per session (its label
    # names its agent) and thousands of options: a search box instead.
    autocomplete_fields = ["session", "agent"]
    created = display.dated("created_at", "created")
    scope_cell = display.clipped("scope", 24)
    agent_cell = display.clipped("agent.name", display.AGENT_WIDTH, description="agent")

    def save_model(self, request: HttpRequest, obj: m.Message, form: Any, change: bool) -> None:
        with events.change():
            super().save_model(request, obj, form, change)
            if not change:
                announce_message(obj, operator=request.user.get_username())

    @admin.display(description="body")
    def excerpt(self, obj: m.Message) -> str:
        return obj.body if len(obj.body) <= 120 else obj.body[:119] + "…"
