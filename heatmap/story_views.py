"""The story pages: the board, an issue, an agent, a path (docs/design.md, "Pages").

Same access as the heatmap and health: a logged-in member, else the login page, and a
404 for a workspace, issue or agent the user may not see exactly as for one that does
not exist. A bad query is a 400 page that keeps the form and names the field in place.
"""

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone

from coordination.models import MAX_ID, Agent, Issue, Project, Workspace
from coordination.services import operators
from heatmap import figures, health, selectors, story
from heatmap import landings as landing_pages
from heatmap import resources as resource_pages
from heatmap.forms import BoardForm, PathForm, ReviewForm, WindowForm
from heatmap.timeline import Links, timeline
from heatmap.views import presets, window_form, workspace_or_404


def links_for(workspace: Workspace) -> Links:
    slug = workspace.slug
    return Links(
        issue=lambda pk: reverse("issue", args=[slug, pk]),
        agent=lambda name: reverse("agent", args=[slug, name]),
        path=lambda path: f"{reverse('path', args=[slug])}?{urlencode({'path': path})}",
    )


def window_of(request: HttpRequest, form: WindowForm) -> dict[str, Any]:
    """The window's inputs (as given, or the default) and its preset links."""
    if form.is_valid():
        shown = window_form(form.cleaned_data)
    else:  # the bad values stay in the inputs, beside their errors
        shown = {"since": request.GET.get("since", ""), "until": request.GET.get("until", "")}
    kept = {key: value for key, value in request.GET.items() if key not in ("since", "until")}
    return {"form": shown, "presets": presets(request.path, kept, now=timezone.now())}


@login_required
def board_page(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = workspace_or_404(request, slug)
    query = BoardForm(request.GET)
    valid = query.is_valid()
    if valid:
        query.resolve(workspace)
        valid = not query.errors
    context: dict[str, Any] = {
        "nav": "issues",
        "workspace": workspace,
        "errors": query.errors,
        "filters": {key: request.GET.get(key, "") for key in ("project", "agent", "text")},
        "projects": Project.objects.filter(workspace=workspace).order_by("key"),
        "agents": Agent.objects.filter(workspace=workspace).order_by("name"),
        **window_of(request, query),
    }
    if not valid:
        return render(request, "heatmap/board.html", context, status=400)
    data = query.cleaned_data
    context["since"], context["until"] = data["since"], data["until"]
    context["columns"] = story.board(
        workspace,
        since=data["since"],
        until=data["until"],
        project=data["project_object"],
        agent=data["agent_object"],
        text=data["text"],
    )
    return render(request, "heatmap/board.html", context)


def issue_or_404(workspace: Workspace, issue_id: int) -> Issue:
    if issue_id > MAX_ID:
        raise Http404("No such issue.")
    issue = (
        Issue.objects.filter(workspace=workspace, pk=issue_id)
        .select_related("project", "assignee", "worktree")
        .first()
    )
    if issue is None:
        raise Http404("No such issue.")
    return issue


@login_required
def issue_page(request: HttpRequest, slug: str, issue_id: int) -> HttpResponse:
    """The issue; a POST is a member's review of it (``review``)."""
    workspace = workspace_or_404(request, slug)
    issue = issue_or_404(workspace, issue_id)
    review = ReviewForm(request.POST if request.method == "POST" else None)
    status = 200
    if review.is_bound:
        status = review_issue(request, issue, review)
        if status == 200:  # done: the page again, as a GET (a reload posts nothing)
            return redirect(request.path)
        issue = issue_or_404(workspace, issue_id)
    told = story.issue_story(workspace, issue)
    report = issue.report if isinstance(issue.report, dict) else None
    context = {
        "nav": "issues",
        "workspace": workspace,
        "issue": issue,
        "story": told,
        "report": report,
        # Only a web address is a link: a report is the agent's text.
        "pr_url": pr_url(report),
        "timeline": timeline(told, links_for(workspace)),
        "timeline_limit": story.TIMELINE_LIMIT,
        "resource_holds": resource_pages.issue_holds(workspace, issue),
        "landings": landing_pages.issue_landings(workspace, issue),
        "review": review,
    }
    return render(request, "heatmap/issue.html", context, status=status)


def review_issue(request: HttpRequest, issue: Issue, form: ReviewForm) -> int:
    """Accept or send back through the admin's own operator services: a logged-in
    member is a person, so the review gate passes; the workflow's other rules hold.
    A refusal becomes the form's error (and the status), never a 500."""
    if not form.is_valid():
        return 400
    operator = request.user.get_username()
    chosen = Issue.objects.filter(pk=issue.pk)
    if form.cleaned_data["decision"] == "accept":
        outcome = operators.transition_issues(
            issues=chosen, to=Issue.Status.DONE, operator=operator
        )
    else:
        outcome = operators.send_back_issues(
            issues=chosen, note=form.cleaned_data["note"], operator=operator
        )
    for refusal in outcome.refused:
        form.add_error(None, refusal.removeprefix(f"#{issue.pk}: "))
    return 409 if outcome.refused else 200


def pr_url(report: dict[str, Any] | None) -> str:
    link = str((report or {}).get("pr_link") or "")
    return link if link.startswith(("https://", "http://")) else ""


@login_required
def agent_page(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    workspace = workspace_or_404(request, slug)
    agent = Agent.objects.filter(workspace=workspace, name=name).first()
    if agent is None:
        raise Http404("No such agent.")
    query = WindowForm(request.GET)
    context: dict[str, Any] = {
        "nav": "issues",
        "workspace": workspace,
        "agent": agent,
        "errors": query.errors,
        **window_of(request, query),
    }
    if not query.is_valid():
        return render(request, "heatmap/agent.html", context, status=400)
    since, until = query.cleaned_data["since"], query.cleaned_data["until"]
    context.update(
        since=since,
        until=until,
        story=story.agent_story(workspace, agent, since=since, until=until),
        resource_holds=resource_pages.agent_holds(workspace, agent),
    )
    return render(request, "heatmap/agent.html", context)


@login_required
def path_page(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = workspace_or_404(request, slug)
    query = PathForm(request.GET)
    context: dict[str, Any] = {
        "nav": "heatmap",
        "workspace": workspace,
        "errors": query.errors,
        "raw_path": request.GET.get("path", ""),
        **window_of(request, query),
    }
    if not query.is_valid():
        return render(request, "heatmap/path.html", context, status=400)
    path = query.cleaned_data["path"]
    since, until = query.cleaned_data["since"], query.cleaned_data["until"]
    window = {"since": since, "until": until, "prefix": path}
    daily = health.per_day(
        selectors.events(workspace, mode="contention", **window),
        time_field="occurred_at",
        kind_field="forced",
        kinds={False: "rejected", True: "forced"},
        since=since,
        until=until,
    )
    told = story.path_story(workspace, path, since=since, until=until)
    beneath = [
        (child, count)
        for child, count in selectors.hottest_paths(workspace, mode="claims", **window)
        if child != path
    ]
    segments = path.split("/")
    context.update(
        since=since,
        until=until,
        path=path,
        story=told,
        parents=[
            {"label": segments[end - 1], "path": "/".join(segments[:end])}
            for end in range(1, len(segments))
        ],
        name=segments[-1],
        beneath=beneath,
        pairs=selectors.colliding_pairs(workspace, **window),
        conflicts_figure=figures.as_data(
            figures.daily_bars(
                daily,
                title="Claim conflicts per day: rejected vs forced",
                colours=figures.SERIES_COLOURS,
                height=220,
            )
        ),
        heatmap_url=f"{reverse('heatmap', args=[slug])}?"
        + urlencode({"mode": "contention", "prefix": path}),
    )
    return render(request, "heatmap/path.html", context)
