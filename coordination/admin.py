"""The operators' console: who is live, what is held, force-release, the logs."""

from typing import Any

from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from coordination import models as m
from coordination.errors import CoordinationError
from coordination.liveness import live_q
from coordination.services import agents, file_claims, workflow
from coordination.services.common import release_unreleased


class LiveFilter(admin.SimpleListFilter):
    """Live / not live, by the one liveness predicate (TTL setting)."""

    title = "live"
    parameter_name = "live"
    session_prefix = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Live"), ("no", "Not live")]

    def live_condition(self) -> Q:
        return live_q(self.session_prefix)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "yes":
            return queryset.filter(self.live_condition())
        if self.value() == "no":
            return queryset.exclude(self.live_condition())
        return queryset


class HolderLiveFilter(LiveFilter):
    """For leases, claims and locks: unreleased and held by a live session."""

    title = "live holder"
    session_prefix = "session__"

    def live_condition(self) -> Q:
        return Q(released_at__isnull=True) & live_q(self.session_prefix)


class AppendOnlyAdmin(admin.ModelAdmin):
    """The contention logs are never edited or deleted (invariant 8)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


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


@admin.register(m.Worktree)
class WorktreeAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "workspace", "path", "branch"]
    list_filter = ["workspace"]
    search_fields = ["slug", "name", "path"]


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


@admin.register(m.Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["scope", "agent", "created_at"]
    list_filter = ["workspace"]
    search_fields = ["scope", "body"]


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
