"""The work graph (invariant 16 (the work graph)): links between issues [link_issues,
unlink_issues], blocked issues, and the paths an issue expects to touch.

**No cycle, ever.** A ``blocks`` or ``parent_of`` link that would close a cycle of
its type is refused (``dependency_cycle``, naming it). Checking and inserting are two
statements, and two requests that would close a cycle together (``a blocks b`` and
``b blocks a``) could each check before the other inserts; so every write of a
workspace's graph first takes the workspace's graph lock: on PostgreSQL a
transaction-scoped advisory lock (exclusive), on SQLite ``BEGIN IMMEDIATE``, which
already made the transaction the only writer. The second writer checks after the
first committed and sees its link.

**Blocked means blocked.** An issue with a ``blocks`` link from an issue that is not
``done`` or ``cancelled`` cannot be started (``start_work``, a move to
``in_progress``: 409 ``blocked``). Closing its last unresolved blocker, or removing
the link to it, writes ``issue.unblocked`` in that transaction. A close takes the
graph lock after the issue's row lock: two blockers of one issue closing at once
then see each other's close, and exactly one of them announces the unblocking. A
link writer holds the graph lock and then only inserts (its foreign-key checks take
``KEY SHARE``, which a transition's ``NO KEY UPDATE`` does not block), so the lock
order issue row → graph lock closes no cycle.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import IntegrityError
from django.db.models import F

from coordination.db.rows import dialect, fetchone
from coordination.errors import Blocked, DependencyCycle, InvalidInput, NotFound
from coordination.models import (
    ORDERED_TYPES,
    EventType,
    ExpectedPath,
    Issue,
    IssueLink,
    LinkType,
    Workspace,
)
from coordination.paths import MAX_PATHS, ancestors, is_directory, normalise_paths, subtree_bounds
from coordination.selectors import lookups
from coordination.services import events

# The advisory lock namespace of the graph's writers, one key per workspace ("PGR").
GRAPH_LOCK = 0x504752

RESOLVED = Issue.CLOSED_STATUSES


@dataclass(frozen=True)
class Linked:
    link: IssueLink
    created: bool


def lock_graph(workspace_id: int) -> None:
    """Serialise the workspace's graph writers until commit (see the module's text)."""
    if dialect().postgres:
        fetchone(("SELECT pg_advisory_xact_lock(%s, %s)", [GRAPH_LOCK, workspace_id]))


# --- links ----------------------------------------------------------------------------


def link_issues(*, workspace: Workspace, source_id: int, type: str, target_id: int) -> Linked:
    """``source`` *type* ``target``: 201 a new link, 200 the one that exists."""
    if type not in LinkType.values:
        raise InvalidInput(
            f"Unknown link type {type!r}; use one of {', '.join(LinkType.values)}.", field="type"
        )
    source = lookups.get_issue(workspace, source_id)
    target = lookups.get_issue(workspace, target_id)
    if source.pk == target.pk:
        raise InvalidInput("An issue cannot be linked to itself.", field="target")
    with events.change():
        lock_graph(workspace.pk)
        existing = IssueLink.objects.filter(source=source, type=type, target=target).first()
        if existing is not None:
            return Linked(existing, created=False)
        if type == LinkType.PARENT_OF:
            parent = (
                IssueLink.objects.filter(type=LinkType.PARENT_OF, target=target)
                .values_list("source_id", flat=True)
                .first()
            )
            if parent is not None:
                raise InvalidInput(
                    f"Issue {target.pk} already has a parent, issue {parent}; a child has one.",
                    field="target",
                    parent=parent,
                )
        if type in ORDERED_TYPES:
            cycle = path_between(workspace, type, start=target.pk, goal=source.pk)
            if cycle is not None:
                raise DependencyCycle(
                    f"Issue {source.pk} {type} issue {target.pk} would close the cycle "
                    + " → ".join(f"#{n}" for n in [source.pk, *cycle])
                    + ".",
                    cycle=[source.pk, *cycle[:-1]],
                )
        try:
            link = IssueLink.objects.create(
                workspace=workspace, source=source, type=type, target=target
            )
        except IntegrityError:  # the database's own guard: one parent, no self-link
            raise InvalidInput("That link is not allowed.", field="target") from None
        events.record(
            workspace.pk,
            EventType.ISSUE_LINKED,
            project_id=source.project_id,
            issue_id=source.pk,
            data={"type": type, "source": source.pk, "target": target.pk},
        )
    return Linked(link, created=True)


def path_between(workspace: Workspace, type: str, *, start: int, goal: int) -> list[int] | None:
    """The issues from ``start`` to ``goal`` along ``type`` links (both included), or
    None: a breadth-first walk, one statement per step, over what ``start`` reaches."""
    came_from: dict[int, int | None] = {start: None}
    frontier = [start]
    while frontier:
        step = IssueLink.objects.filter(
            workspace=workspace, type=type, source_id__in=frontier
        ).values_list("source_id", "target_id")
        frontier = []
        for source_id, target_id in sorted(step):
            if target_id in came_from:
                continue
            came_from[target_id] = source_id
            if target_id == goal:
                path = [goal]
                while (previous := came_from[path[-1]]) is not None:
                    path.append(previous)
                return path[::-1]
            frontier.append(target_id)
    return None


def unlink_issues(*, workspace: Workspace, issue_id: int, link_id: int) -> None:
    """Remove a link of the issue (either end); a removed ``blocks`` link that was
    the target's last unresolved blocker writes ``issue.unblocked``."""
    issue = lookups.get_issue(workspace, issue_id)
    with events.change():
        lock_graph(workspace.pk)
        link = (
            IssueLink.objects.filter(workspace=workspace, pk=link_id)
            .select_related("source", "target")
            .first()
        )
        if link is None or issue.pk not in (link.source_id, link.target_id):
            raise NotFound(f"Issue {issue.pk} has no link {link_id}.")
        link.delete()
        events.record(
            workspace.pk,
            EventType.ISSUE_UNLINKED,
            project_id=link.source.project_id,
            issue_id=link.source_id,
            data={"type": link.type, "source": link.source_id, "target": link.target_id},
        )
        if link.type == LinkType.BLOCKS and link.source.status not in RESOLVED:
            announce_unblocked(workspace, [link.target], resolved_by=None)


# --- blocked issues --------------------------------------------------------------------


def unresolved_blockers(issue_id: int) -> list[dict[str, object]]:
    """``{"id", "title", "status"}`` of each blocker of the issue not yet closed."""
    return [
        {"id": pk, "title": title, "status": status}
        for pk, title, status in Issue.objects.filter(
            outgoing_links__type=LinkType.BLOCKS, outgoing_links__target_id=issue_id
        )
        .exclude(status__in=RESOLVED)
        .order_by("pk")
        .values_list("pk", "title", "status")
    ]


def check_not_blocked(issue: Issue) -> None:
    """409 ``blocked`` with ``blocked_by`` while the issue has an unresolved blocker."""
    blockers = unresolved_blockers(issue.pk)
    if blockers:
        named = ", ".join(f"#{blocker['id']}" for blocker in blockers)
        raise Blocked(
            f"Issue {issue.pk} is blocked by {named}; it cannot be started until "
            "they are done or cancelled.",
            blocked_by=blockers,
        )


def on_transition(workspace: Workspace, issue: Issue, *, to: str) -> None:
    """Inside a transition, the issue's row locked and its status not yet changed:
    entering ``in_progress`` needs no unresolved blocker; a close that resolves
    another issue's last blocker announces it (``issue.unblocked``, ``resolved_by``
    this issue)."""
    if to == Issue.Status.IN_PROGRESS:
        lock_graph(workspace.pk)
        check_not_blocked(issue)
    elif to in RESOLVED and issue.status not in RESOLVED:
        lock_graph(workspace.pk)
        blocked = Issue.objects.filter(
            incoming_links__type=LinkType.BLOCKS, incoming_links__source_id=issue.pk
        ).exclude(status__in=RESOLVED)
        announce_unblocked(workspace, list(blocked), resolved_by=issue.pk)


def announce_unblocked(
    workspace: Workspace, candidates: Iterable[Issue], *, resolved_by: int | None
) -> None:
    """``issue.unblocked`` for each open candidate with no unresolved blocker left
    but ``resolved_by``, which is closing."""
    for candidate in candidates:
        left = [b for b in unresolved_blockers(candidate.pk) if b["id"] != resolved_by]
        if candidate.status in RESOLVED or left:
            continue
        events.record(
            workspace.pk,
            EventType.ISSUE_UNBLOCKED,
            project_id=candidate.project_id,
            issue_id=candidate.pk,
            data={"resolved_by": resolved_by},
        )


# --- expected paths --------------------------------------------------------------------


def checked_expected_paths(paths: object) -> list[str]:
    """0 to 100 paths, each normalised and validated exactly as a claim's (a glob is
    refused, a directory keeps its ``/``); sorted, without duplicates."""
    if not isinstance(paths, list | tuple) or not all(isinstance(p, str) for p in paths):
        raise InvalidInput("Give the paths as a list of strings.", field="paths")
    if len(paths) > MAX_PATHS:
        raise InvalidInput(
            f"Give at most {MAX_PATHS} paths, not {len(paths)}.", field="paths", count=len(paths)
        )
    try:
        return normalise_paths(paths)
    except InvalidInput as error:
        error.extra.setdefault("field", "paths")
        raise


def set_expected_paths(*, issue: Issue, paths: list[str]) -> None:
    """Replace the issue's expected paths (already ``checked_expected_paths``), with
    the probes the ready queue finds collisions by (``models.ExpectedPath``)."""
    ExpectedPath.objects.filter(issue=issue).delete()
    rows = []
    for path in paths:
        end = subtree_bounds(path)[1] if is_directory(path) else ""
        rows.append(
            ExpectedPath(
                workspace_id=issue.workspace_id, issue=issue, path=path, probe=path, subtree_end=end
            )
        )
        rows += [
            ExpectedPath(workspace_id=issue.workspace_id, issue=issue, path=path, probe=above)
            for above in ancestors(path)
        ]
    ExpectedPath.objects.bulk_create(rows)


def expected_paths(issue: Issue) -> list[str]:
    """The issue's expected paths (each path's own probe row)."""
    shown = ExpectedPath.objects.filter(issue=issue, probe=F("path"))
    return sorted(shown.values_list("path", flat=True))
