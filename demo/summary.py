"""What a seeded workspace holds, counted the same way whether it was seeded just
now or earlier."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count

from coordination.models import (
    AgentSession,
    ClaimConflict,
    Event,
    EventType,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    ResourceHold,
    Run,
    WipCapDenial,
    Workspace,
)


@dataclass(frozen=True)
class Summary:
    sessions: int
    live_sessions: int
    crashed_sessions: int  # never ended, no longer heartbeating
    leases: int
    file_claims: int
    conflicts_rejected: int
    conflicts_forced: int
    wip_denials: int
    resource_holds: int
    resource_refusals: int
    messages: int
    issues: dict[str, int]
    runs: dict[str, int]

    def line(self) -> str:
        runs = ", ".join(f"{count} {status}" for status, count in self.runs.items())
        issues = ", ".join(f"{count} {status}" for status, count in self.issues.items())
        return (
            f"{self.sessions} sessions ({self.live_sessions} live, {self.crashed_sessions} "
            f"crashed), {self.leases} leases, {self.file_claims} file claims, conflicts "
            f"{self.conflicts_rejected} rejected / {self.conflicts_forced} forced, "
            f"{self.wip_denials} WIP denials, {self.resource_holds} resource holds "
            f"({self.resource_refusals} refused), {self.messages} messages; "
            f"runs: {runs}; issues: {issues}"
        )


def by_value(rows: dict[str, int], order: list[str]) -> dict[str, int]:
    return {value: rows.get(value, 0) for value in order}


def summarise(workspace: Workspace) -> Summary:
    sessions = AgentSession.objects.filter(workspace=workspace)
    live = sessions.live().count()
    active = sessions.filter(status=AgentSession.Status.ACTIVE).count()
    conflicts = ClaimConflict.objects.filter(workspace=workspace)
    run_counts = dict(
        Run.objects.filter(workspace=workspace)
        .values("status")
        .annotate(n=Count("id"))
        .order_by()
        .values_list("status", "n")
    )
    issue_counts = dict(
        Issue.objects.filter(workspace=workspace)
        .values("status")
        .annotate(n=Count("id"))
        .order_by()
        .values_list("status", "n")
    )
    return Summary(
        sessions=sessions.count(),
        live_sessions=live,
        crashed_sessions=active - live,
        leases=IssueLease.objects.filter(workspace=workspace).count(),
        file_claims=FileClaim.objects.filter(workspace=workspace).count(),
        conflicts_rejected=conflicts.filter(forced=False).count(),
        conflicts_forced=conflicts.filter(forced=True).count(),
        wip_denials=WipCapDenial.objects.filter(workspace=workspace).count(),
        resource_holds=ResourceHold.objects.filter(workspace=workspace).count(),
        resource_refusals=Event.objects.filter(
            workspace=workspace, type=EventType.RESOURCE_REFUSED
        ).count(),
        messages=Message.objects.filter(workspace=workspace).count(),
        issues=by_value(issue_counts, list(Issue.Status.values)),
        runs=by_value(run_counts, list(Run.Status.values)),
    )
