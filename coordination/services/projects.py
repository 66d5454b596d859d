"""Projects and issues: creation and edits (status changes go through workflow)."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import IntegrityError

from coordination.errors import InvalidInput, InvalidTransition
from coordination.models import EventType, Issue, Project, Workspace
from coordination.selectors import lookups
from coordination.services import events, graph, leases, workflow


@contextmanager
def reference_in(field: str) -> Iterator[None]:
    """Name the body field whose slug or name is not a row of the workspace.

    Lookups are scoped by workspace, so a row of another workspace is unknown here
    (400 ``invalid``, invariant 9 (workspace isolation)); the database refuses such a link as
    well."""
    try:
        yield
    except InvalidInput as error:
        error.extra.setdefault("field", field)
        raise


def create_project(
    *,
    workspace: Workspace,
    key: str,
    name: str,
    agent_wip_limit: int = 3,
    primary_worktree: str | None = None,
    max_lease_age_seconds: int | None = None,
) -> Project:
    with reference_in("primary_worktree"):
        worktree = lookups.get_worktree(workspace, primary_worktree) if primary_worktree else None
    try:
        with events.change():
            return Project.objects.create(
                workspace=workspace,
                key=key,
                name=name,
                agent_wip_limit=agent_wip_limit,
                primary_worktree=worktree,
                max_lease_age_seconds=max_lease_age_seconds,
            )
    except IntegrityError:
        raise InvalidInput(f"Project {key!r} already exists.", field="key") from None


def update_project(*, workspace: Workspace, project: Project, changes: dict[str, Any]) -> Project:
    if "primary_worktree" in changes:
        slug = changes.pop("primary_worktree")
        with reference_in("primary_worktree"):
            project.primary_worktree = lookups.get_worktree(workspace, slug) if slug else None
    cap_changed = (
        "max_lease_age_seconds" in changes
        and changes["max_lease_age_seconds"] != project.max_lease_age_seconds
    )
    for field, value in changes.items():
        setattr(project, field, value)
    try:
        with events.change():
            project.save()
            # Its unreleased leases age by the new cap (invariant 17 (stalled is derived)).
            if cap_changed:
                leases.refresh_ages_out_at(project=project)
    except IntegrityError:
        raise InvalidInput(f"Project {project.key!r} already exists.", field="key") from None
    return project


def resolve_issue_references(workspace: Workspace, changes: dict[str, Any]) -> dict[str, Any]:
    """Turn the body's slugs and names into the workspace's rows (unknown: 400)."""
    resolved = dict(changes)
    if "project" in resolved:
        with reference_in("project"):
            resolved["project"] = lookups.get_project(workspace, resolved["project"])
    if "worktree" in resolved:
        slug = resolved["worktree"]
        with reference_in("worktree"):
            resolved["worktree"] = lookups.get_worktree(workspace, slug) if slug else None
    if "assignee" in resolved:
        name = resolved["assignee"]
        with reference_in("assignee"):
            resolved["assignee"] = lookups.get_agent(workspace, name) if name else None
    return resolved


def create_issue(*, workspace: Workspace, fields: dict[str, Any]) -> Issue:
    """New issues start in ``backlog``, or in ``todo`` if they are ready."""
    values = resolve_issue_references(workspace, fields)
    paths = graph.checked_expected_paths(values.pop("paths", []))
    status = values.pop("status", Issue.Status.BACKLOG)
    if status not in (Issue.Status.BACKLOG, Issue.Status.TODO):
        raise InvalidTransition(f"A new issue starts in backlog or todo, not {status}.")
    issue = Issue(workspace=workspace, status=status, **values)
    if status == Issue.Status.TODO:
        workflow.check_ready(issue)
    with events.change():
        issue.save()
        if paths:
            graph.set_expected_paths(issue=issue, paths=paths)
        announce_created(issue)
    return issue


def announce_created(issue: Issue) -> None:
    """``issue.created`` (the admin's add form announces its issues too)."""
    events.record(
        issue.workspace_id, EventType.ISSUE_CREATED, project_id=issue.project_id, issue_id=issue.pk
    )


def update_issue(*, workspace: Workspace, issue: Issue, fields: dict[str, Any]) -> Issue:
    """Write only the given fields: a full save from an object read before a
    concurrent transition would put its old status back (and a closed issue would
    reopen with its lease and claims already released)."""
    changes = resolve_issue_references(workspace, fields)
    paths = graph.checked_expected_paths(changes.pop("paths")) if "paths" in changes else None
    for field, value in changes.items():
        setattr(issue, field, value)
    if paths is None:
        issue.save(update_fields=[*changes, "updated_at"])
        return issue
    with events.change():  # the row and its expected paths together
        issue.save(update_fields=[*changes, "updated_at"])
        graph.set_expected_paths(issue=issue, paths=paths)
    return issue
