"""Each workspace at a glance: the managers' pages and the admin dashboard."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import (
    Count,
    F,
    Func,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Window,
)
from django.db.models.functions import RowNumber

from coordination.liveness import live_q
from coordination.models import AgentSession, ClaimConflict, Project, Run, WipCapDenial, Workspace

RECENT = timedelta(hours=24)  # "the last 24 h" of the workspace list and the dashboard


def count_of(rows: QuerySet[Any]) -> Subquery:
    """``(SELECT COUNT(*) …)``: a plain function, not an aggregate, so no GROUP BY; and
    ``*``, not the id, so an index on the filter's columns can answer it alone."""
    counted = (
        rows.order_by()
        .annotate(n=Func(template="COUNT(*)", output_field=IntegerField()))
        .values("n")
    )
    return Subquery(counted, output_field=IntegerField())


def workspace_overview(workspaces: QuerySet[Workspace], *, since: datetime) -> QuerySet[Workspace]:
    """Each workspace with ``live_agents`` now, and since ``since`` its claim conflicts
    (``rejected``, ``forced``, ``recent_conflicts`` for both) and WIP-cap ``denials``:
    correlated subqueries, so the list is one query however many workspaces it shows."""
    conflicts = ClaimConflict.objects.filter(workspace=OuterRef("pk"), occurred_at__gte=since)
    return workspaces.annotate(
        live_agents=count_of(AgentSession.objects.live().filter(workspace=OuterRef("pk"))),
        rejected=count_of(conflicts.filter(forced=False)),
        forced=count_of(conflicts.filter(forced=True)),
        recent_conflicts=count_of(conflicts),
        denials=count_of(
            WipCapDenial.objects.filter(workspace=OuterRef("pk"), occurred_at__gte=since)
        ),
    )


@dataclass(frozen=True)
class ProjectLoad:
    pk: int
    workspace_id: int
    key: str
    name: str
    limit: int
    live: int  # unreleased leases whose holder is live: what the WIP cap counts
    stale: int  # unreleased, holder dead: reclaimable by the next claimer


def project_loads(workspaces: Iterable[Workspace]) -> list[ProjectLoad]:
    """Every project of ``workspaces`` against its WIP cap, by key, in one query."""
    unreleased = Q(issues__leases__released_at__isnull=True)
    rows = (
        Project.objects.filter(workspace__in=list(workspaces))
        .annotate(
            live=Count("issues__leases", filter=unreleased & live_q("issues__leases__session__")),
            unreleased=Count("issues__leases", filter=unreleased),
        )
        .order_by("key", "workspace_id")
    )
    return [
        ProjectLoad(
            pk=row.pk,
            workspace_id=row.workspace_id,
            key=row.key,
            name=row.name,
            limit=row.agent_wip_limit,
            live=row.live,  # type: ignore[attr-defined]
            stale=row.unreleased - row.live,  # type: ignore[attr-defined]
        )
        for row in rows
    ]


# Runs that did not start: skipped (worktree unresolved) or cancelled (busy).
TROUBLED_RUN_STATUSES = (Run.Status.SKIPPED, Run.Status.CANCELLED)


def troubled_runs(
    workspaces: Iterable[Workspace], *, since: datetime, until: datetime, per_workspace: int
) -> list[Run]:
    """The newest ``per_workspace`` runs of each workspace that did not start in the
    window, newest first: one query (a row number per workspace) however many."""
    newest_first = (F("started_at").desc(), F("id").desc())
    return list(
        Run.objects.filter(
            workspace__in=list(workspaces),
            status__in=TROUBLED_RUN_STATUSES,
            started_at__gte=since,
            started_at__lt=until,
        )
        .select_related("issue", "agent", "worktree")
        .annotate(rank=Window(RowNumber(), partition_by=F("workspace_id"), order_by=newest_first))
        .filter(rank__lte=per_workspace)
        .order_by("workspace_id", *newest_first)
    )
