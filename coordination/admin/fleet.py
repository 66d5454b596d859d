"""Coordination state: sessions, leases, file claims, worktree locks and runs.

No back doors: these rows are written only by the services, which enforce the WIP
cap, liveness and the all-or-nothing rule. The admin shows them read-only (no add,
no edit, no delete, for superusers too) and changes them only through actions that
call ``coordination.services.operators``.
"""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from coordination import models as m
from coordination.admin.filters import HolderStateFilter, RunLiveFilter, SessionStateFilter
from coordination.admin.reporting import operator_name, report
from coordination.services import operators


class StateAdmin(admin.ModelAdmin):
    """Read-only rows of coordination state, changed only by actions."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(m.AgentSession)
class AgentSessionAdmin(StateAdmin):
    list_display = [
        "id",
        "agent",
        "role",
        "workspace",
        "status",
        "live",
        "started_at",
        "last_heartbeat_at",
        "ended_at",
    ]
    list_filter = [SessionStateFilter, "status", "workspace", "agent__role"]
    list_select_related = ["agent", "workspace"]
    search_fields = ["agent__name", "agent__role", "agent__department"]
    date_hierarchy = "started_at"
    actions = ["end_sessions"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.AgentSession]:
        return super().get_queryset(request).with_live()  # type: ignore[attr-defined]

    @admin.display(description="role")
    def role(self, obj: m.AgentSession) -> str:
        return obj.agent.role

    @admin.display(boolean=True)
    def live(self, obj: Any) -> bool:
        return bool(obj.is_live)

    @admin.action(description="End selected sessions (release what they hold: agent_ended)")
    def end_sessions(self, request: HttpRequest, queryset: QuerySet[m.AgentSession]) -> None:
        report(self, request, "Ended", operators.end_sessions(sessions=queryset))


class HeldAdmin(StateAdmin):
    """Leases, claims and locks: live while unreleased and their holder is live."""

    list_filter = [HolderStateFilter, "release_reason", "workspace"]

    @admin.display(boolean=True, description="holder live")
    def live(self, obj: Any) -> bool:
        return bool(obj.is_live)


@admin.register(m.IssueLease)
class IssueLeaseAdmin(HeldAdmin):
    list_display = [
        "id",
        "issue",
        "project",
        "agent",
        "session",
        "live",
        "acquired_at",
        "released_at",
        "release_reason",
    ]
    list_filter = [HolderStateFilter, "release_reason", "issue__project", "workspace"]
    list_select_related = ["issue__project", "agent", "session"]
    search_fields = ["issue__title", "=issue__id", "agent__name"]
    date_hierarchy = "acquired_at"
    actions = ["force_release"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.IssueLease]:
        return super().get_queryset(request).with_live()  # type: ignore[attr-defined]

    @admin.display(description="project")
    def project(self, obj: m.IssueLease) -> str:
        return obj.issue.project.key

    @admin.action(description="Force-release selected leases (overridden; the issue is told)")
    def force_release(self, request: HttpRequest, queryset: QuerySet[m.IssueLease]) -> None:
        outcome = operators.force_release_leases(leases=queryset, operator=operator_name(request))
        report(self, request, "Force-released", outcome)


@admin.register(m.FileClaim)
class FileClaimAdmin(HeldAdmin):
    list_display = [
        "path",
        "issue",
        "agent",
        "session",
        "live",
        "claimed_at",
        "released_at",
        "release_reason",
    ]
    list_filter = [HolderStateFilter, "release_reason", "issue__project", "workspace"]
    list_select_related = ["issue", "agent", "session"]
    search_fields = ["path", "issue__title", "=issue__id", "agent__name"]
    date_hierarchy = "claimed_at"
    actions = ["force_release"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.FileClaim]:
        return super().get_queryset(request).with_live()  # type: ignore[attr-defined]

    @admin.action(description="Force-release selected file claims (overridden; the issue is told)")
    def force_release(self, request: HttpRequest, queryset: QuerySet[m.FileClaim]) -> None:
        outcome = operators.force_release_file_claims(
            claims=queryset, operator=operator_name(request)
        )
        report(self, request, "Force-released", outcome)


@admin.register(m.WorktreeLock)
class WorktreeLockAdmin(HeldAdmin):
    list_display = [
        "worktree",
        "run",
        "session",
        "live",
        "acquired_at",
        "released_at",
        "release_reason",
    ]
    list_select_related = ["worktree", "run", "session"]
    search_fields = ["worktree__slug", "=run__id"]
    date_hierarchy = "acquired_at"
    actions = ["force_release"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.WorktreeLock]:
        return super().get_queryset(request).with_live()  # type: ignore[attr-defined]

    @admin.action(description="Force-release selected worktree locks (their runs are cancelled)")
    def force_release(self, request: HttpRequest, queryset: QuerySet[m.WorktreeLock]) -> None:
        outcome = operators.force_release_worktree_locks(
            locks=queryset, operator=operator_name(request)
        )
        report(self, request, "Force-released", outcome)


@admin.register(m.Run)
class RunAdmin(StateAdmin):
    """The dispatcher's record: status, lock and error are read, never edited."""

    list_display = [
        "id",
        "issue",
        "agent",
        "lock_mode",
        "worktree",
        "status",
        "live",
        "error",
        "started_at",
        "finished_at",
    ]
    list_filter = [RunLiveFilter, "status", "error", "lock_mode", "issue__project", "workspace"]
    list_select_related = ["issue", "agent", "worktree"]
    search_fields = ["issue__title", "=issue__id", "agent__name", "error_detail"]
    date_hierarchy = "started_at"

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.Run]:
        return super().get_queryset(request).with_live()  # type: ignore[attr-defined]

    @admin.display(boolean=True)
    def live(self, obj: Any) -> bool:
        return bool(obj.is_live)
