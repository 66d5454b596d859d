"""Coordination state: sessions, leases, file claims, worktree locks and runs."""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from coordination import models as m
from coordination.admin.filters import HolderLiveFilter, LiveFilter
from coordination.services import agents, file_claims
from coordination.services.common import release_unreleased


@admin.register(m.AgentSession)
class AgentSessionAdmin(admin.ModelAdmin):
    list_display = ["id", "agent", "workspace", "status", "live", "last_heartbeat_at"]
    list_filter = [LiveFilter, "status", "workspace"]
    list_select_related = ["agent", "workspace"]
    search_fields = ["agent__name"]
    actions = ["end_sessions"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.AgentSession]:
        return super().get_queryset(request).with_live()  # type: ignore[attr-defined]

    @admin.display(boolean=True)
    def live(self, obj: Any) -> bool:
        return bool(obj.is_live)

    @admin.action(description="End selected sessions (release what they hold)")
    def end_sessions(self, request: HttpRequest, queryset: QuerySet[m.AgentSession]) -> None:
        for session in queryset.select_related("workspace"):
            agents.end_session(workspace=session.workspace, session_id=session.pk)


class HeldAdmin(admin.ModelAdmin):
    """Leases, claims and locks: force-release with reason ``overridden``."""

    list_select_related = ["session"]
    actions = ["force_release"]

    def release(self, queryset: QuerySet[Any]) -> int:
        return release_unreleased(queryset, m.ReleaseReason.OVERRIDDEN)

    @admin.action(description="Force-release selected (reason: overridden)")
    def force_release(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self.message_user(request, f"Released {self.release(queryset)}.")


@admin.register(m.IssueLease)
class IssueLeaseAdmin(HeldAdmin):
    list_display = [
        "id",
        "issue",
        "session",
        "agent",
        "acquired_at",
        "released_at",
        "release_reason",
    ]
    list_filter = [HolderLiveFilter, "release_reason", "workspace"]
    list_select_related = ["issue", "session", "agent"]


@admin.register(m.FileClaim)
class FileClaimAdmin(HeldAdmin):
    list_display = [
        "path",
        "issue",
        "session",
        "agent",
        "claimed_at",
        "released_at",
        "release_reason",
    ]
    list_filter = [HolderLiveFilter, "release_reason", "workspace"]
    list_select_related = ["issue", "session", "agent"]
    search_fields = ["path"]

    def release(self, queryset: QuerySet[Any]) -> int:
        # Through the service: it locks rows in path order, as claimers do.
        return len(file_claims.release_claims(queryset, m.ReleaseReason.OVERRIDDEN))


@admin.register(m.WorktreeLock)
class WorktreeLockAdmin(HeldAdmin):
    list_display = ["worktree", "session", "run", "acquired_at", "released_at", "release_reason"]
    list_filter = [HolderLiveFilter, "release_reason", "workspace"]
    list_select_related = ["worktree", "session", "run"]


@admin.register(m.Run)
class RunAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "issue",
        "agent",
        "lock_mode",
        "worktree",
        "status",
        "error",
        "started_at",
    ]
    list_filter = ["status", "error", "lock_mode", "workspace"]
    list_select_related = ["issue", "agent", "worktree"]
    # Status, lock and error are the dispatcher's record; operators read them.
    readonly_fields = ["status", "lock_mode", "worktree", "error", "error_detail", "finished_at"]
