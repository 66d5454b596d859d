"""Agent sessions: one derived state (live / stalled / stale / ended), their progress
and, on a session's page, what it holds and ran, read-only."""

from typing import Any

from django.contrib import admin
from django.db.models import F, QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from coordination import models as m
from coordination.admin import display
from coordination.admin.filters import SessionStateFilter
from coordination.admin.reporting import report
from coordination.admin.state import StateAdmin
from coordination.services import operators


class NewestFormSet(BaseInlineFormSet):
    """The first ``SHOWN`` rows of the inline's order; the session's lists have the rest."""

    SHOWN = 25

    def get_queryset(self) -> QuerySet[Any]:
        if not hasattr(self, "_newest"):
            self._newest = super().get_queryset()[: self.SHOWN]
        return self._newest


class HoldingInline(admin.TabularInline):
    """What a session holds or held: held rows first, then the newest released."""

    formset = NewestFormSet
    classes = ["holdings"]
    extra = 0
    can_delete = False
    related: tuple[str, ...] = ()
    newest: tuple[Any, ...] = (F("released_at").desc(nulls_first=True), "-pk")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).select_related(*self.related).order_by(*self.newest)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="issue")
    def issue_cell(self, row: Any) -> SafeString:
        return display.admin_link(row.issue, display.issue_label(row.issue, 48))

    @admin.display(description="released")
    def released(self, row: Any) -> SafeString | str:
        return display.released(row)


class LeaseInline(HoldingInline):
    model = m.IssueLease
    verbose_name_plural = "issue leases"
    related = ("issue",)
    fields = readonly_fields = ("lease", "issue_cell", "acquired", "released", "fence")

    @admin.display(description="lease")
    def lease(self, row: m.IssueLease) -> SafeString:
        return display.admin_link(row, f"lease {row.pk}")

    acquired = display.dated("acquired_at", "acquired")


class FileClaimInline(HoldingInline):
    model = m.FileClaim
    related = ("issue",)
    fields = readonly_fields = ("path_cell", "issue_cell", "claimed", "released")

    @admin.display(description="path")
    def path_cell(self, row: m.FileClaim) -> SafeString:
        return display.admin_link(row, display.claim_path(row.path, 60))

    claimed = display.dated("claimed_at", "claimed")


class WorktreeLockInline(HoldingInline):
    model = m.WorktreeLock
    related = ("worktree", "run")
    fields = readonly_fields = ("lock", "run", "acquired", "released")

    @admin.display(description="worktree")
    def lock(self, row: m.WorktreeLock) -> SafeString:
        return display.admin_link(row, row.worktree.slug)

    acquired = display.dated("acquired_at", "acquired")


class ResourceHoldInline(HoldingInline):
    """Resource holds (invariant 20 (resources are counted)), of a session or of a resource."""

    model = m.ResourceHold
    verbose_name_plural = "resource holds"
    related = ("resource", "issue", "session__agent")
    fields = readonly_fields = ("hold", "holder_cell", "issue_or_none", "units_cell", "released")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        state = display.session_state("session__")
        return super().get_queryset(request).annotate(holder_state=state)

    @admin.display(description="hold")
    def hold(self, row: m.ResourceHold) -> SafeString:
        return display.admin_link(row, f"{row.resource.name} · hold {row.pk}")

    @admin.display(description="holder")
    def holder_cell(self, row: m.ResourceHold) -> SafeString:
        return display.holder(row, stacked=False)

    @admin.display(description="issue")
    def issue_or_none(self, row: m.ResourceHold) -> SafeString | str:
        return display.NONE if row.issue is None else self.issue_cell(row)

    @admin.display(description="units")
    def units_cell(self, row: m.ResourceHold) -> SafeString:
        return display.units_and_slots(row)


class RunInline(HoldingInline):
    model = m.Run
    related = ("issue", "worktree")
    newest = (F("finished_at").desc(nulls_first=True), "-pk")
    fields = readonly_fields = (
        "run",
        "issue_cell",
        "status",
        "error",
        "worktree",
        "started",
        "took",
    )

    @admin.display(description="run")
    def run(self, row: m.Run) -> SafeString:
        return display.admin_link(row, f"run {row.pk}")

    started = display.dated("started_at", "started")

    @admin.display(description="took")
    def took(self, row: m.Run) -> SafeString | str:
        return display.took(row.started_at, row.finished_at)


@admin.register(m.AgentSession)
class AgentSessionAdmin(StateAdmin):
    list_display = [
        "label",
        "role",
        "workspace_cell",
        "state_ended",
        "started",
        "heartbeat_cell",
        "progress_cell",
    ]
    list_filter = [SessionStateFilter, "workspace", "agent__role"]
    list_select_related = ["agent", "workspace"]
    search_fields = ["agent__name", "agent__role", "agent__department", "=id"]
    date_hierarchy = "started_at"
    actions = ["end_sessions", "end_stalled_sessions"]
    fieldsets = [
        (None, {"fields": ["agent", "role", "workspace", "state", "opened_by", "lists"]}),
        ("Times", {"fields": ["started", "heartbeat", "progress", "note", "ended"]}),
    ]
    readonly_fields = [
        "role",
        "state",
        "opened_by",
        "started",
        "heartbeat",
        "progress",
        "note",
        "ended",
        "lists",
    ]
    inlines = [LeaseInline, FileClaimInline, WorktreeLockInline, ResourceHoldInline, RunInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.AgentSession]:
        return (
            super()
            .get_queryset(request)
            .select_related("agent", "workspace", "api_key")
            .annotate(state=display.session_state())
        )

    role = display.clipped("agent.role", 16, description="role")

    @admin.display(description="opened by")
    def opened_by(self, obj: m.AgentSession) -> str:
        """The key that opened the session (invariant 13 (the key is the actor)); none for a
        person's."""
        key = obj.api_key
        if key is None:
            return "—"
        return f"{key.key_prefix}… ({key.kind} key{f' {key.name}' if key.name else ''})"

    workspace_cell = display.clipped(
        "workspace.slug", display.WORKSPACE_WIDTH, description="workspace"
    )

    @admin.display(description="session", ordering="pk")
    def label(self, obj: m.AgentSession) -> SafeString:
        return format_html('<span title="{}">{}</span>', obj, display.session_label(obj))

    @admin.display(description="state", ordering="state")
    def state(self, obj: Any) -> SafeString:
        return display.badge(obj.state)

    @admin.display(description="state", ordering="state")
    def state_ended(self, obj: Any) -> SafeString:
        """The state, and when an ended session ended (below it: one column for both)."""
        if obj.ended_at is None:
            return display.badge(obj.state)
        return format_html("{}<br>{}", display.badge(obj.state), display.when(obj.ended_at))

    started = display.dated("started_at", "started")

    @admin.display(description="last heartbeat", ordering="last_heartbeat_at")
    def heartbeat(self, obj: m.AgentSession) -> SafeString | str:
        if obj.ended_at is not None or obj.status == m.AgentSession.Status.ENDED:
            return display.when(obj.last_heartbeat_at)
        return format_html(
            '{} <span class="quiet nowrap">{}</span>',
            display.when(obj.last_heartbeat_at),
            display.ago(obj.last_heartbeat_at),
        )

    @admin.display(description="heartbeat", ordering="last_heartbeat_at")
    def heartbeat_cell(self, obj: m.AgentSession) -> SafeString | str:
        """The last heartbeat, under a header as narrow as its times."""
        return self.heartbeat(obj)

    @admin.display(description="last progress", ordering="last_progress_at")
    def progress(self, obj: m.AgentSession) -> SafeString | str:
        """Its last change of state (invariant 17 (stalled is derived)), and how long ago while it
        is active."""
        if obj.status == m.AgentSession.Status.ENDED:
            return display.when(obj.last_progress_at)
        return format_html(
            '{} <span class="quiet nowrap">{}</span>',
            display.when(obj.last_progress_at),
            display.ago(obj.last_progress_at),
        )

    @admin.display(description="progress", ordering="last_progress_at")
    def progress_cell(self, obj: m.AgentSession) -> SafeString | str:
        return self.progress(obj)

    note = display.clipped("progress_note", 60, wrap=True, description="progress note")

    ended = display.dated("ended_at", "ended")

    @admin.display(description="everything it held")
    def lists(self, obj: m.AgentSession) -> SafeString:
        """Links to the lists of everything the session held, past the inlines' rows."""
        models = [m.IssueLease, m.FileClaim, m.WorktreeLock, m.ResourceHold, m.Run]
        return format_html_join(
            " · ",
            '<a href="{}?session__id__exact={}">{}</a>',
            (
                (
                    reverse(f"admin:coordination_{model._meta.model_name}_changelist"),
                    obj.pk,
                    model._meta.verbose_name_plural,
                )
                for model in models
            ),
        )

    @admin.action(description="End selected sessions (release what they hold: agent_ended)")
    def end_sessions(self, request: HttpRequest, queryset: QuerySet[m.AgentSession]) -> None:
        report(self, request, "Ended", operators.end_sessions(sessions=queryset))

    @admin.action(description="End selected stalled sessions (agent_ended; the agent is told)")
    def end_stalled_sessions(
        self, request: HttpRequest, queryset: QuerySet[m.AgentSession]
    ) -> None:
        outcome = operators.end_stalled_sessions(
            sessions=queryset, operator=request.user.get_username()
        )
        report(self, request, "Ended", outcome)
