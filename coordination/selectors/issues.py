"""Projects and issues: the list, the ready queue [get_ready_issues], and an issue
as a service returns it."""

from collections.abc import Mapping, Sequence
from typing import Any

from django.db.models import Prefetch, QuerySet, prefetch_related_objects

from coordination.db import sql
from coordination.db.rows import Listing, dialect, take
from coordination.filtersets import IssueFilter
from coordination.models import Agent, Issue, IssueLease, Project, Workspace, Worktree
from coordination.selectors.filtering import filtered
from coordination.selectors.graph import attach, with_graph


def projects(workspace: Workspace) -> QuerySet[Project]:
    return (
        Project.objects.filter(workspace=workspace)
        .select_related("primary_worktree")
        .order_by("key")
    )


def unreleased_leases() -> Prefetch:
    """An issue's unreleased lease (one at most), as ``unreleased_leases``."""
    unreleased = IssueLease.objects.unreleased().with_live().select_related("agent")
    return Prefetch("leases", queryset=unreleased, to_attr="unreleased_leases")


def issues(workspace: Workspace) -> QuerySet[Issue]:
    """Each issue with its project, worktree, assignee, unreleased lease and, in the
    same statement, its links and expected paths (``selectors.graph``)."""
    return with_graph(
        Issue.objects.filter(workspace=workspace)
        .select_related("project", "worktree", "assignee")
        .prefetch_related(unreleased_leases())
        .order_by("-id")
    )


def issue_list(
    *, workspace: Workspace, filters: Mapping[str, Any] | None = None
) -> QuerySet[Issue]:
    return filtered(IssueFilter, issues(workspace), filters)


def issue_as_shown(issue: Issue) -> Issue:
    """``issue`` as a service returned it, with what ``issues()`` loads: only what it
    lacks is fetched (a relation already loaded, or empty, costs no query)."""
    prefetch_related_objects([issue], "project", "worktree", "assignee", unreleased_leases())
    return issue


def ready_issues(
    workspace: Workspace,
    *,
    project: Project | None = None,
    include_not_ready: bool = False,
    avoid_collisions: bool = True,
    free: bool = False,
) -> Listing[Issue]:
    """The ready queue [get_ready_issues]: issues in ``todo`` that meet the definition
    of ready and have no live lease, urgent first (priority 1, 2, 3, 4, then 0 for
    none), oldest first within a priority. With ``include_not_ready``, the other open
    issues without a live lease follow, in the same order (``workflow.missing_for_work``
    says what each lacks). Each issue as ``issues()`` loads it.

    Blocked issues are not ready (invariant 16 (the work graph)). ``avoid_collisions``: within a
    priority, issues none of whose expected paths a live claim holds come first;
    ``free``: only those. Each issue brings its ``collisions`` (``selectors.graph``).

    SQL (``sql.queue_page``), paged as a queryset is: the queue alone is read off its
    partial index (``issue_ready_queue_idx``) in order, up to the page's end, and on
    PostgreSQL its count reads the index only."""
    d = dialect()
    queue = sql.Queue(
        workspace_id=workspace.pk,
        project_id=project.pk if project is not None else None,
        closed=sorted(Issue.CLOSED_STATUSES) if include_not_ready else None,
        avoid_collisions=avoid_collisions,
        free=free,
    )
    return Listing(
        counted=sql.queue_count(d, queue),
        page=lambda limit, offset: sql.queue_page(d, queue, limit=limit, offset=offset),
        load=queued_issue,
    )


def queued_issue(row: Sequence[Any]) -> Issue:
    """A row of ``sql.queue_page``: the issue with its project, worktree and assignee
    and, as ``unreleased_leases``, its unreleased lease with ``is_live`` and its agent."""
    issue, at = take(Issue, row, 0)
    assert issue is not None
    project, at = take(Project, row, at)
    assert project is not None  # an issue's project is required
    issue.project = project
    issue.worktree, at = take(Worktree, row, at)
    issue.assignee, at = take(Agent, row, at)
    lease, at = take(IssueLease, row, at)
    if lease is not None:
        lease.is_live = bool(row[at])  # type: ignore[attr-defined]
        lease.agent, _ = take(Agent, row, at + 1)
    issue.unreleased_leases = [lease] if lease is not None else []  # type: ignore[attr-defined]
    _, at = take(Agent, row, at + 1)
    attach(issue, row, at)
    return issue
