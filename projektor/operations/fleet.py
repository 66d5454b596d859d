"""The fleet's gauges and counters, computed when Prometheus scrapes.

Nine grouped statements, whatever the number of workspaces, projects or rows (a
test pins the count): the workspaces, the projects, and one ``GROUP BY`` each for
live sessions (and the stalled among them, invariant 17 (stalled is derived)), unreleased leases
(split by their liveness, invariants 1 (liveness) and 17 (stalled is derived)), lease releases by
reason, unreleased file claims, claim conflicts, WIP-cap denials and webhook deliveries by state. A
workspace or project with none of something shows 0, so "no live agents" is a value an alert can
see. The two counters count the append-only logs (invariant 8 (append-only logs)): they only grow.
"""

from collections import defaultdict

from django.db.models import Count, Q
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from coordination.liveness import live_q, stalled_q, young_q
from coordination.models import (
    AgentSession,
    ClaimConflict,
    FileClaim,
    IssueLease,
    Project,
    ReleaseReason,
    WebhookDelivery,
    WipCapDenial,
    Workspace,
)


def fleet_metrics() -> list[Metric]:
    slugs = dict(Workspace.objects.order_by().values_list("id", "slug"))
    projects = list(
        Project.objects.order_by().values_list("id", "workspace_id", "key", "agent_wip_limit")
    )
    session_counts = {
        workspace_id: (live, stalled)
        for workspace_id, live, stalled in AgentSession.objects.live()
        .order_by()
        .values("workspace_id")
        .annotate(n=Count("id"), stalled=Count("id", filter=stalled_q()))
        .values_list("workspace_id", "n", "stalled")
    }
    leases = (
        IssueLease.objects.unreleased()
        .order_by()
        .values("issue__project_id")
        .annotate(total=Count("id"), live=Count("id", filter=Q(live_q("session__")) & young_q()))
        .values_list("issue__project_id", "total", "live")
    )
    releases = (
        IssueLease.objects.filter(released_at__isnull=False)
        .order_by()
        .values("workspace_id", "release_reason")
        .annotate(n=Count("id"))
        .values_list("workspace_id", "release_reason", "n")
    )
    claims = dict(
        FileClaim.objects.unreleased()
        .order_by()
        .values("workspace_id")
        .annotate(n=Count("id"))
        .values_list("workspace_id", "n")
    )
    conflicts = (
        ClaimConflict.objects.order_by()
        .values("workspace_id", "forced")
        .annotate(n=Count("id"))
        .values_list("workspace_id", "forced", "n")
    )
    denials = dict(
        WipCapDenial.objects.order_by()
        .values("workspace_id")
        .annotate(n=Count("id"))
        .values_list("workspace_id", "n")
    )

    sessions_family = GaugeMetricFamily(
        "projektor_live_sessions", "Live agent sessions (invariant 1).", labels=["workspace"]
    )
    stalled_family = GaugeMetricFamily(
        "projektor_stalled_sessions",
        "Live sessions with no progress for PROJEKTOR_STALL_AFTER_SECONDS (invariant 17).",
        labels=["workspace"],
    )
    release_counts: dict[tuple[int, str], int] = defaultdict(int)
    for workspace_id, reason, n in releases:
        release_counts[(workspace_id, reason)] = n
    releases_family = CounterMetricFamily(
        "projektor_lease_releases",
        "Released leases by reason (max_age: past its project's age cap, holder live).",
        labels=["workspace", "reason"],
    )
    claims_family = GaugeMetricFamily(
        "projektor_file_claims", "Unreleased file claims.", labels=["workspace"]
    )
    denials_family = CounterMetricFamily(
        "projektor_wip_denials", "Claims refused by a project's WIP cap.", labels=["workspace"]
    )
    conflict_counts: dict[tuple[int, bool], int] = defaultdict(int)
    for workspace_id, forced, n in conflicts:
        conflict_counts[(workspace_id, bool(forced))] = n
    conflicts_family = CounterMetricFamily(
        "projektor_claim_conflicts",
        "Contested file paths: rejected (forced=false) and overridden (forced=true).",
        labels=["workspace", "forced"],
    )
    for workspace_id, slug in sorted(slugs.items(), key=lambda item: item[1]):
        live, stalled = session_counts.get(workspace_id, (0, 0))
        sessions_family.add_metric([slug], live)
        stalled_family.add_metric([slug], stalled)
        for reason in ReleaseReason.values:
            releases_family.add_metric([slug, reason], release_counts[(workspace_id, reason)])
        claims_family.add_metric([slug], claims.get(workspace_id, 0))
        denials_family.add_metric([slug], denials.get(workspace_id, 0))
        for forced in (False, True):
            count = conflict_counts[(workspace_id, forced)]
            conflicts_family.add_metric([slug, str(forced).lower()], count)

    lease_counts = {project_id: (total, live) for project_id, total, live in leases}
    leases_family = GaugeMetricFamily(
        "projektor_leases",
        "Unreleased leases per project, by their liveness (stale: reclaimable: its holder "
        "dead or past its project's age cap).",
        labels=["workspace", "project", "state"],
    )
    limits_family = GaugeMetricFamily(
        "projektor_wip_limit",
        "A project's WIP cap (agent_wip_limit).",
        labels=["workspace", "project"],
    )
    for project_id, workspace_id, key, limit in sorted(projects, key=lambda p: (p[1], p[2])):
        slug = slugs[workspace_id]
        total, live = lease_counts.get(project_id, (0, 0))
        leases_family.add_metric([slug, key, "live"], live)
        leases_family.add_metric([slug, key, "stale"], total - live)
        limits_family.add_metric([slug, key], limit)
    deliveries = dict(
        WebhookDelivery.objects.order_by()
        .values("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    deliveries_family = GaugeMetricFamily(
        "projektor_webhook_deliveries",
        "Webhook deliveries by state (pending, delivered, failed).",
        labels=["state"],
    )
    for state in WebhookDelivery.State.values:
        deliveries_family.add_metric([state], deliveries.get(state, 0))
    return [
        sessions_family,
        stalled_family,
        leases_family,
        releases_family,
        limits_family,
        claims_family,
        conflicts_family,
        denials_family,
        deliveries_family,
    ]
