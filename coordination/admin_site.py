"""The admin site, branded Projektor, whose index is the operators' dashboard.

A module of its own, outside ``coordination.admin``: the site is built while the
admin app loads, before the ModelAdmins in that package register on it.
"""

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone

from coordination.models import Run, Workspace
from coordination.selectors import dashboard
from coordination.selectors.access import workspaces_visible_to

RUNS_SHOWN = 5  # per workspace: the newest runs that did not start


@dataclass(frozen=True)
class WorkspaceDashboard:
    workspace: Workspace
    live_agents: int
    loads: list[dashboard.ProjectLoad]
    rejected: int
    forced: int
    denials: int
    troubled_runs: list[Run]


def dashboards(workspaces: QuerySet[Workspace]) -> list[WorkspaceDashboard]:
    """The last 24 h of each workspace, as an operator needs it at a glance: the
    workspace overview, the project loads and the runs that did not start, three
    queries however many workspaces there are."""
    now = timezone.now()
    overview = list(dashboard.workspace_overview(workspaces, since=now - dashboard.RECENT))
    loads: dict[int, list[dashboard.ProjectLoad]] = defaultdict(list)
    for load in dashboard.project_loads(overview):
        loads[load.workspace_id].append(load)
    runs: dict[int, list[Run]] = defaultdict(list)
    for run in dashboard.troubled_runs(
        overview, since=now - dashboard.RECENT, until=now, per_workspace=RUNS_SHOWN
    ):
        runs[run.workspace_id].append(run)
    return [
        WorkspaceDashboard(
            workspace=workspace,
            live_agents=workspace.live_agents,  # type: ignore[attr-defined]
            loads=loads[workspace.pk],
            rejected=workspace.rejected,  # type: ignore[attr-defined]
            forced=workspace.forced,  # type: ignore[attr-defined]
            denials=workspace.denials,  # type: ignore[attr-defined]
            troubled_runs=runs[workspace.pk],
        )
        for workspace in overview
    ]


class ProjektorAdminSite(admin.AdminSite):
    site_header = "Projektor operations"
    site_title = "Projektor admin"
    index_title = "Fleet dashboard"
    site_url = "/workspaces/"  # "View site": the managers' pages, not a 404
    index_template = "admin/projektor_index.html"
    empty_value_display = "—"

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        workspaces = workspaces_visible_to(request.user)
        context = {"dashboards": dashboards(workspaces)}
        response: TemplateResponse = super().index(request, {**(extra_context or {}), **context})
        return response
