"""The managers' pages: workspaces, code heatmap, factory health.

Function views: access check → selectors → pure figures → render.
"""

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone

from coordination.errors import CoordinationError
from coordination.models import FileClaim, IssueLease, Project, Workspace
from coordination.selectors import dashboard
from coordination.selectors.access import workspaces_visible_to
from heatmap import figures, health, selectors
from heatmap import landings as landing_pages
from heatmap import resources as resource_pages
from heatmap.forms import HeatmapForm, WindowForm

PRESETS = (("24 h", timedelta(hours=24)), ("7 d", timedelta(days=7)), ("30 d", timedelta(days=30)))


def workspace_or_404(request: HttpRequest, slug: str) -> Workspace:
    """The same 404 for a workspace that does not exist and one the user may not
    see: the page never hints that it exists."""
    visible = workspaces_visible_to(request.user)
    workspace = visible.filter(slug=slug).first()
    if workspace is None:
        raise Http404("No such workspace.")
    return workspace


def home(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("workspaces")
    return redirect(f"{reverse('login')}?next={reverse('workspaces')}")


@login_required
def workspace_list(request: HttpRequest) -> HttpResponse:
    rows = dashboard.workspace_overview(
        workspaces_visible_to(request.user),
        since=timezone.now() - dashboard.RECENT,
    )
    return render(request, "heatmap/workspaces.html", {"nav": "workspaces", "workspaces": rows})


def query_url(path: str, params: dict[str, Any]) -> str:
    kept = {key: value for key, value in params.items() if value not in (None, "")}
    return f"{path}?{urlencode(kept)}" if kept else path


def iso_minute(moment: datetime) -> str:
    """As a ``datetime-local`` input shows it (minutes: its default step)."""
    return moment.strftime("%Y-%m-%dT%H:%M")


def window_form(query: dict[str, Any]) -> dict[str, str]:
    return {"since": iso_minute(query["since"]), "until": iso_minute(query["until"])}


def presets(path: str, params: dict[str, Any], *, now: datetime) -> list[dict[str, str]]:
    """Links for the last 24 h / 7 d / 30 d, keeping the other parameters."""
    return [
        {
            "label": label,
            "url": query_url(path, {**params, "since": iso_minute(now - span), "until": ""}),
        }
        for label, span in PRESETS
    ]


def breadcrumb(prefix: str, link: Any) -> list[dict[str, str]]:
    crumbs = [{"label": "all paths", "url": link("")}]
    segments = prefix.split("/") if prefix else []
    for end in range(1, len(segments) + 1):
        crumbs.append({"label": segments[end - 1], "url": link("/".join(segments[:end]))})
    return crumbs


def invalid_query(
    request: HttpRequest, workspace: Workspace, template: str, errors: Any, nav: str
) -> Any:
    """The page with its form as sent and each error beside its field (400)."""
    context = {
        "nav": nav,
        "workspace": workspace,
        "errors": errors,
        "form": {"since": request.GET.get("since", ""), "until": request.GET.get("until", "")},
        "selected": selected(request.GET),
        "projects": Project.objects.filter(workspace=workspace).order_by("key"),
        "presets": presets(request.path, {}, now=timezone.now()),
    }
    return render(request, template, context, status=400)


def selected(values: Any) -> dict[str, str]:
    """The heatmap form's choices as the inputs show them."""
    return {
        "mode": values.get("mode") or "claims",
        "prefix": values.get("prefix", ""),
        "project": values.get("project", ""),
        "depth": str(values.get("depth") or selectors.DEFAULT_DEPTH),
    }


@login_required
def heatmap_page(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = workspace_or_404(request, slug)
    query = HeatmapForm(request.GET)
    if not query.is_valid():
        return invalid_query(request, workspace, "heatmap/heatmap.html", query.errors, "heatmap")
    try:
        arguments = query.heatmap_arguments(workspace)
    except CoordinationError as error:
        field = "prefix" if query.cleaned_data["prefix"] else "project"
        errors = {field: [error.detail]}
        return invalid_query(request, workspace, "heatmap/heatmap.html", errors, "heatmap")
    heatmap = selectors.code_heatmap(workspace, **arguments)
    path = request.path
    params = {  # links keep the window as given: an open "until" stays "now"
        "mode": heatmap.mode,
        "since": request.GET.get("since", ""),
        "until": request.GET.get("until", ""),
        "project": heatmap.project.key if heatmap.project else "",
        "depth": heatmap.depth if heatmap.depth != selectors.DEFAULT_DEPTH else "",
    }

    def link(prefix: str) -> str:
        return query_url(path, {**params, "prefix": prefix})

    window = {key: arguments[key] for key in ("since", "until", "project", "prefix")}
    context = {
        "nav": "heatmap",
        "workspace": workspace,
        "heatmap": heatmap,
        "params": params,
        "selected": selected(params | {"prefix": heatmap.prefix, "depth": heatmap.depth}),
        "form": window_form(query.cleaned_data),
        "projects": Project.objects.filter(workspace=workspace).order_by("key"),
        "modes": [
            {
                "mode": mode,
                "url": query_url(path, {**params, "mode": mode, "prefix": heatmap.prefix}),
                "active": mode == heatmap.mode,
            }
            for mode in selectors.MODES
        ],
        "presets": presets(path, {**params, "prefix": heatmap.prefix}, now=timezone.now()),
        "breadcrumb": breadcrumb(heatmap.prefix, link),
        "children": [
            {"node": node, "url": link(node.path) if node.is_dir else ""}
            for node in heatmap.nodes
            if node.depth == 1
        ],
        "hottest": heatmap.hottest(),
        "pairs": (
            selectors.colliding_pairs(workspace, **window) if heatmap.mode == "contention" else []
        ),
        "figure": (
            figures.as_data(
                figures.treemap(
                    heatmap, root_label=heatmap.prefix or workspace.slug, drill_url=link
                )
            )
            if heatmap.total
            else None
        ),
    }
    return render(request, "heatmap/heatmap.html", context)


@login_required
def health_page(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = workspace_or_404(request, slug)
    query = WindowForm(request.GET)
    if not query.is_valid():
        return invalid_query(request, workspace, "heatmap/health.html", query.errors, "health")
    since, until = query.cleaned_data["since"], query.cleaned_data["until"]
    window = (workspace, since, until)
    loads = dashboard.project_loads([workspace])
    conflicts = health.conflicts_per_day(*window)
    denials = health.wip_denials_per_day(*window)
    lease_releases = health.releases_per_day(IssueLease, *window)
    claim_releases = health.releases_per_day(FileClaim, *window)
    charts = [
        (
            "conflicts",
            conflicts,
            "Claim conflicts per day: rejected vs forced",
            figures.SERIES_COLOURS,
        ),
        ("denials", denials, "WIP-cap denials per day", figures.SERIES_COLOURS),
        (
            "lease-releases",
            lease_releases,
            "Lease releases per day by reason (expired = crashed holder)",
            figures.REASON_COLOURS,
        ),
        (
            "claim-releases",
            claim_releases,
            "File-claim releases per day by reason (expired = crashed holder)",
            figures.REASON_COLOURS,
        ),
    ]
    resources = resource_pages.resources_now(*window)
    context = {
        "nav": "health",
        "workspace": workspace,
        "form": window_form(query.cleaned_data),
        "presets": presets(request.path, {}, now=timezone.now()),
        "agents": health.live_agents(workspace),
        "stalled": health.stalled_agents(workspace),
        "stall_after": health.stall_after_words(),
        "loads": loads,
        "load_figure": figures.as_data(figures.wip_load(loads)) if loads else None,
        "outcomes": health.session_outcomes(*window),
        "totals": {
            "rejected": sum(conflicts.series["rejected"]),
            "forced": sum(conflicts.series["forced"]),
            "denials": denials.total,
            "lease_expired": sum(lease_releases.series["expired"]),
            "lease_agent_ended": sum(lease_releases.series["agent_ended"]),
            "lease_max_age": sum(lease_releases.series["max_age"]),
        },
        "charts": [
            {
                "id": chart_id,
                "json_id": f"chart-{chart_id}-data",
                "total": daily.total,
                "figure": figures.as_data(figures.daily_bars(daily, title=title, colours=colours)),
            }
            for chart_id, daily, title, colours in charts
        ],
        "resources": resources,
        "refusals_figure": figures.as_data(
            figures.daily_bars(
                resources.refusals,
                title="Refused resource calls per day",
                colours={},
                height=260,
            )
        )
        if resources.resources
        else None,
        "landings": landing_pages.landings_now(*window),
        "run_counts": health.troubled_run_counts(*window),
        "runs": dashboard.troubled_runs([workspace], since=since, until=until, per_workspace=15),
    }
    return render(request, "heatmap/health.html", context)
