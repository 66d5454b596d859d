"""The contention logs: append-only (invariant 8 (append-only logs)), so the admin only reads
them."""

import json

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from coordination import actors
from coordination import models as m
from coordination.admin import display
from coordination.admin.state import StateAdmin


class AppendOnlyAdmin(StateAdmin):
    """Never added, edited or deleted here: the services append, everyone reads."""

    occurred = display.dated("occurred_at", "when")


def side(issue: m.Issue, agent: m.Agent | None) -> SafeString:
    """One side of a conflict: ``#12 · atlas``, the issue's title on hover."""
    return format_html(
        '<span title="{}"><span class="nowrap">#{} ·</span> <span class="nowrap">{}</span></span>',
        issue.title,
        issue.pk,
        display.clip(agent.name, display.AGENT_WIDTH) if agent is not None else "no agent",
    )


@admin.register(m.WipCapDenial)
class WipCapDenialAdmin(AppendOnlyAdmin):
    list_display = ["occurred", "project_key", "issue_cell", "holder", "limit"]
    list_filter = ["project", "workspace"]
    search_fields = ["issue__title", "=issue__id", "agent__name", "project__key"]
    date_hierarchy = "occurred_at"

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.WipCapDenial]:
        return (
            super()
            .get_queryset(request)
            .select_related("workspace", "project", "issue", "agent", "session__agent")
            .annotate(holder_state=display.session_state("session__"))
        )

    project_key = display.clipped("project.key", 12, description="project")

    @admin.display(description="issue", ordering="issue_id")
    def issue_cell(self, obj: m.WipCapDenial) -> SafeString | str:
        return display.issue_label(obj.issue, 40)

    @admin.display(description="refused", ordering="agent__name")
    def holder(self, obj: m.WipCapDenial) -> SafeString:
        return display.holder(obj)


@admin.register(m.ClaimConflict)
class ClaimConflictAdmin(AppendOnlyAdmin):
    list_display = ["occurred", "path_cell", "rejected", "holding", "outcome"]
    list_filter = ["forced", "rejected_issue__project", "workspace"]
    search_fields = [
        "path",
        "rejected_issue__title",
        "holding_issue__title",
        "rejected_agent__name",
        "holding_agent__name",
    ]
    date_hierarchy = "occurred_at"

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.ClaimConflict]:
        return (
            super()
            .get_queryset(request)
            .select_related(
                "workspace",
                "rejected_issue",
                "rejected_agent",
                "rejected_session__agent",
                "holding_issue",
                "holding_agent",
                "holding_session__agent",
            )
        )

    @admin.display(description="path", ordering="path")
    def path_cell(self, obj: m.ClaimConflict) -> SafeString:
        return display.claim_path(obj.path, 30)

    @admin.display(description="wanted by", ordering="rejected_issue_id")
    def rejected(self, obj: m.ClaimConflict) -> SafeString:
        return side(obj.rejected_issue, obj.rejected_agent)

    @admin.display(description="held by", ordering="holding_issue_id")
    def holding(self, obj: m.ClaimConflict) -> SafeString:
        return side(obj.holding_issue, obj.holding_agent)

    @admin.display(description="outcome", ordering="forced")
    def outcome(self, obj: m.ClaimConflict) -> SafeString:
        """Refused (the claimer waits), or forced (the holder lost the path)."""
        if obj.forced:
            return mark_safe('<b class="forced">forced</b>')
        return mark_safe('<span class="quiet">refused</span>')


@admin.register(m.Event)
class EventAdmin(AppendOnlyAdmin):
    """The event log (invariant 12 (one event per change)): what happened, in commit order; pruned
    only by ``prune_events``."""

    list_display = ["id", "occurred", "type", "project_key", "issue_id", "who", "summary"]
    list_filter = ["type", "workspace"]
    search_fields = ["=issue__id", "=session__id", "agent__name", "type"]
    date_hierarchy = "occurred_at"
    ordering = ["-id"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.Event]:
        return super().get_queryset(request).select_related("workspace", "project", "agent")

    project_key = display.clipped("project.key", 12, description="project")

    @admin.display(description="who", ordering="session_id")
    def who(self, obj: m.Event) -> str:
        """The actor in the pages' words (``coordination.actors``), and its session."""
        actor = actors.of_event(obj)
        named = actor.words if actor.kind != "unknown" else ""
        session = f"session {obj.session_id}" if obj.session_id else ""
        return " · ".join(part for part in (named, session) if part) or "—"

    @admin.display(description="data")
    def summary(self, obj: m.Event) -> SafeString | str:
        return display.clip(json.dumps(obj.data, sort_keys=True), 48, wrap=True)
