"""The landing queue's entries (invariant 21 (the default branch is always green)):
written only by the landing services, as the queue and its testers report, so the admin
only reads them (no add, no edit, no delete), filtered by project, state and reason."""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from coordination import models as m
from coordination.admin import display
from coordination.admin.state import StateAdmin


@admin.register(m.Landing)
class LandingAdmin(StateAdmin):
    list_display = [
        "id",
        "project_key",
        "issue_cell",
        "agent_cell",
        "state_cell",
        "reason_cell",
        "queued",
        "finished",
    ]
    list_display_links = ["id"]
    list_filter = ["project", "state", "reason", "workspace"]
    search_fields = ["=issue__id", "issue__title", "agent__name", "branch", "commit"]
    date_hierarchy = "queued_at"
    ordering = ["-id"]
    fields = readonly_fields = (
        "workspace",
        "project",
        "issue",
        "agent",
        "session",
        "branch",
        "commit",
        "lease_fence",
        "paths",
        "state",
        "reason",
        "detail",
        "fence",
        "tester",
        "tester_agent",
        "landed_commit",
        "queued_at",
        "testing_at",
        "finished_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[m.Landing]:
        return (
            super()
            .get_queryset(request)
            .select_related("workspace", "project", "issue", "agent", "tester_agent")
        )

    project_key = display.clipped("project.key", 12, description="project")
    agent_cell = display.clipped("agent.name", display.AGENT_WIDTH, description="agent")
    queued = display.dated("queued_at", "queued")
    finished = display.dated("finished_at", "finished")

    @admin.display(description="issue", ordering="issue_id")
    def issue_cell(self, obj: m.Landing) -> SafeString:
        return display.admin_link(obj.issue, display.issue_label(obj.issue, 28))

    @admin.display(description="state", ordering="state")
    def state_cell(self, obj: m.Landing) -> SafeString:
        return format_html('<span class="landing-state state-{}">{}</span>', obj.state, obj.state)

    @admin.display(description="reason", ordering="reason")
    def reason_cell(self, obj: m.Landing) -> SafeString | str:
        return display.clip(obj.reason, 14) if obj.reason else display.NONE
