"""The admin site, branded Projektor, whose index is the operators' dashboard.

A module of its own, outside ``coordination.admin``: the site is built while the
admin app loads, before the ModelAdmins in that package register on it.
"""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib import admin
from django.db.models import Count, Q
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone

from coordination import selectors
from coordination.models import ClaimConflict, Run, WipCapDenial, Workspace
from heatmap import health

RECENT = timedelta(hours=24)


@dataclass(frozen=True)
class WorkspaceDashboard:
    workspace: Workspace
    live_agents: int
    loads: list[health.ProjectLoad]
    rejected: int
    forced: int
    denials: int
    troubled_runs: list[Run]


def dashboard(workspace: Workspace) -> WorkspaceDashboard:
    """The last 24 h of one workspace, as an operator needs it at a glance."""
    since = timezone.now() - RECENT
    conflicts = ClaimConflict.objects.filter(workspace=workspace, occurred_at__gte=since)
    counts = conflicts.aggregate(
        rejected=Count("pk", filter=Q(forced=False)), forced=Count("pk", filter=Q(forced=True))
    )
    return WorkspaceDashboard(
        workspace=workspace,
        live_agents=selectors.live_sessions(workspace).count(),
        loads=health.project_loads(workspace),
        rejected=counts["rejected"],
        forced=counts["forced"],
        denials=WipCapDenial.objects.filter(workspace=workspace, occurred_at__gte=since).count(),
        troubled_runs=list(health.troubled_runs(workspace, since, timezone.now(), limit=5)),
    )


class ProjektorAdminSite(admin.AdminSite):
    site_header = "Projektor operations"
    site_title = "Projektor admin"
    index_title = "Fleet dashboard"
    site_url = "/workspaces/"  # "View site": the managers' pages, not a 404
    index_template = "admin/projektor_index.html"

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        workspaces = Workspace.objects.order_by("name", "slug")
        context = {"dashboards": [dashboard(workspace) for workspace in workspaces]}
        response: TemplateResponse = super().index(request, {**(extra_context or {}), **context})
        return response
