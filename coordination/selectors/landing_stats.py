"""The landing queue counted, for the managers' pages, the operators' metrics and the
issue cards (invariant 21 (the default branch is always green)): each project's open
entries and who tests its batch, the entries that finished in a window, an issue's
entries, and the whole queue's counts. Reads only; a fixed number of statements each.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery

from coordination.liveness import live_q
from coordination.models import AgentSession, Issue, Landing, Workspace
from coordination.selectors.landings import landings, place_in_queue

OUTCOMES = ("landed", *Landing.Reason.values)  # landed, or the rejection's reason


def open_entry_of_issue() -> dict[str, Any]:
    """Annotations of an issue queryset: its open entry's ``landing_state`` (queued or
    testing; None when it has none) and ``landing_place`` in its project's queue
    (1-based, the batch under test first), as two correlated subqueries."""
    entry = Landing.objects.filter(issue=OuterRef("pk"), state__in=Landing.OPEN)
    return {
        "landing_state": Subquery(entry.values("state")[:1]),
        "landing_place": Subquery(
            entry.annotate(place=place_in_queue()).values("place")[:1],
            output_field=IntegerField(),
        ),
    }


def issue_entries(workspace: Workspace, issue: Issue, limit: int = 30) -> list[Landing]:
    """The issue's entries, newest first, each with its ``place`` (None once closed)."""
    return list(landings(workspace).filter(issue=issue).order_by("-pk")[:limit])


@dataclass(frozen=True)
class QueueNow:
    """A project's queue now: ``depth`` open entries (``testing`` of them in the batch
    under test), its tester (``tester_session``: its session, ``tester_live``: whether it
    still heartbeats; a dead tester's batch is the next take's, whole)."""

    project_id: int
    depth: int
    testing: int
    tester_session: int | None = None
    tester_agent: str | None = None
    tester_live: bool = False
    fence: int | None = None
    testing_since: datetime | None = None


def queues_now(workspace: Workspace) -> dict[int, QueueNow]:
    """Each project with open entries, by its id: two statements (the depths, and the
    batches under test with their testers)."""
    depths = (
        Landing.objects.filter(workspace=workspace, state__in=Landing.OPEN)
        .order_by()
        .values("project_id")
        .annotate(n=Count("pk"), testing=Count("pk", filter=Q(state=Landing.State.TESTING)))
        .values_list("project_id", "n", "testing")
    )
    queues = {
        project_id: QueueNow(project_id=project_id, depth=n, testing=testing)
        for project_id, n, testing in depths
    }
    if not any(queue.testing for queue in queues.values()):
        return queues
    live = AgentSession.objects.filter(live_q(), pk=OuterRef("tester_id")).values("pk")[:1]
    batches = (
        Landing.objects.filter(workspace=workspace, state=Landing.State.TESTING)
        .annotate(live_tester=Subquery(live))
        .order_by("project_id", "pk")
        .values_list(
            "project_id", "tester_id", "tester_agent__name", "live_tester", "fence", "testing_at"
        )
    )
    for project_id, session, agent, live_tester, fence, since in batches:
        queue = queues.get(project_id)
        if queue is None or queue.fence is not None:  # its head entry tells
            continue
        queues[project_id] = QueueNow(
            project_id=project_id,
            depth=queue.depth,
            testing=queue.testing,
            tester_session=session,
            tester_agent=agent,
            tester_live=live_tester is not None,
            fence=fence,
            testing_since=since,
        )
    return queues


def finished_between(
    workspace: Workspace, since: datetime, until: datetime
) -> QuerySet[Landing, tuple[Any, ...]]:
    """``(project_id, state, reason, queued_at, finished_at, fence, landed_commit)`` of the
    entries that landed or were rejected in ``[since, until)``, from the finished-at index
    (``fence``: the batch's, which moved the default branch once for its landed entries)."""
    return (
        Landing.objects.filter(workspace=workspace, finished_at__gte=since, finished_at__lt=until)
        .order_by("finished_at", "pk")
        .values_list(
            "project_id", "state", "reason", "queued_at", "finished_at", "fence", "landed_commit"
        )
    )


def queue_counts() -> QuerySet[Landing, tuple[Any, ...]]:
    """Every project's entries by state and reason, in one ``GROUP BY``: ``(workspace_id,
    project_id, state, reason, n)``."""
    return (
        Landing.objects.order_by()
        .values("workspace_id", "project_id", "state", "reason")
        .annotate(n=Count("pk"))
        .values_list("workspace_id", "project_id", "state", "reason", "n")
    )
