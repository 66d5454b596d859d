"""The fleet's gauges and counters, computed when Prometheus scrapes.

Twelve grouped statements, whatever the number of workspaces, projects or rows (a
test pins the count): the workspaces, the projects, and one ``GROUP BY`` each for
live sessions (and the stalled among them, invariant 17 (stalled is derived)), unreleased leases
(split by their liveness, invariants 1 (liveness) and 17 (stalled is derived)), lease releases by
reason, unreleased file claims, claim conflicts, WIP-cap denials and webhook deliveries by state;
the resources with their units in use and calls waiting, and their refusals of the last day
(invariant 20 (resources are counted)); the landing queues' entries by state and reason
(invariant 21 (the default branch is always green)). A workspace, project or resource with
none of something shows 0, so "no live agents" is a value an alert can see. The counters
count the append-only logs (invariant 8 (append-only logs)) and the finished landing
entries: they only grow. Refusals are read from the event log, which is pruned: a window
(a gauge), not a counter that would fall at each pruning.
"""

from collections import defaultdict
from datetime import timedelta

from django.db.models import Count, DateTimeField, ExpressionWrapper, OuterRef, Q, Subquery, Sum
from django.db.models import Value as V
from django.db.models.functions import Coalesce
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from coordination.liveness import DbNow, live_q, stalled_q, young_q
from coordination.models import (
    AgentSession,
    ClaimConflict,
    Event,
    EventType,
    FileClaim,
    IssueLease,
    Landing,
    Project,
    ReleaseReason,
    Resource,
    ResourceHold,
    ResourceWait,
    WebhookDelivery,
    WipCapDenial,
    Workspace,
)
from coordination.selectors import landing_stats

# The window of projektor_resource_refusals_24h (within any event retention: a day at least).
REFUSALS_WINDOW = timedelta(days=1)


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
        "projektor_live_sessions",
        "Live agent sessions (invariant 1 (liveness)).",
        labels=["workspace"],
    )
    stalled_family = GaugeMetricFamily(
        "projektor_stalled_sessions",
        "Live sessions with no progress for PROJEKTOR_STALL_AFTER_SECONDS "
        "(invariant 17 (stalled is derived)).",
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
        *resource_metrics(slugs),
        *landing_metrics(slugs, projects),
    ]


def resource_metrics(slugs: dict[int, str]) -> list[Metric]:
    """Per resource: its capacity, the units of its live holds (a dead session's units
    are not in use: invariant 1 (liveness)), the calls in its line now, and its
    ``resource_busy`` answers of the last day. Two statements."""
    in_use = (
        ResourceHold.objects.live()
        .filter(resource=OuterRef("pk"))
        .order_by()
        .values("resource")
        .annotate(n=Sum("units"))
        .values("n")
    )
    waiting = (
        ResourceWait.objects.filter(resource=OuterRef("pk"), deadline__gt=DbNow())
        .filter(live_q("session__"))
        .order_by()
        .values("resource")
        .annotate(n=Count("pk"))
        .values("n")
    )
    resources = (
        Resource.objects.order_by()
        .annotate(in_use=Coalesce(Subquery(in_use), 0), waiting=Coalesce(Subquery(waiting), 0))
        .values_list("workspace_id", "name", "capacity", "in_use", "waiting")
    )
    since = ExpressionWrapper(DbNow() - V(REFUSALS_WINDOW), output_field=DateTimeField())
    refusals = {
        (workspace_id, name): n
        for workspace_id, name, n in Event.objects.filter(
            type=EventType.RESOURCE_REFUSED, occurred_at__gt=since
        )
        .order_by()
        .values("workspace_id", "data__resource")
        .annotate(n=Count("id"))
        .values_list("workspace_id", "data__resource", "n")
    }
    labels = ["workspace", "resource"]
    capacity_family = GaugeMetricFamily(
        "projektor_resource_capacity", "A resource's capacity, in units.", labels=labels
    )
    in_use_family = GaugeMetricFamily(
        "projektor_resource_units_in_use",
        "Units of a resource in live holds (invariant 20 (resources are counted)); a dead "
        "session's are not.",
        labels=labels,
    )
    waiting_family = GaugeMetricFamily(
        "projektor_resource_waiting",
        "Calls waiting now in a resource's line (acquire with wait).",
        labels=labels,
    )
    refusals_family = GaugeMetricFamily(
        "projektor_resource_refusals_24h",
        "resource_busy answers of the last 24 hours (resource.refused events).",
        labels=labels,
    )
    # A resource of a workspace made since the workspaces were read waits for the next scrape.
    rows = sorted((row for row in resources if row[0] in slugs), key=lambda r: (slugs[r[0]], r[1]))
    for workspace_id, name, capacity, units, waits in rows:
        series = [slugs[workspace_id], name]
        capacity_family.add_metric(series, capacity)
        in_use_family.add_metric(series, units)
        waiting_family.add_metric(series, waits)
        refusals_family.add_metric(series, refusals.get((workspace_id, name), 0))
    return [capacity_family, in_use_family, waiting_family, refusals_family]


def landing_metrics(
    slugs: dict[int, str], projects: list[tuple[int, int, str, int]]
) -> list[Metric]:
    """Per project: its landing queue's depth (open entries: queued, and the batch under
    test) and its finished entries by outcome (landed, or the rejection's reason), every
    outcome of every project reported, 0 when none. One statement; entries are never
    deleted but with their project, so the outcomes only grow: a counter."""
    depth: dict[int, int] = defaultdict(int)
    finished: dict[tuple[int, str], int] = defaultdict(int)
    for _, project_id, state, reason, n in landing_stats.queue_counts():
        if state in Landing.OPEN:
            depth[project_id] += n
        elif state == Landing.State.LANDED:
            finished[(project_id, "landed")] += n
        else:
            finished[(project_id, reason)] += n
    depth_family = GaugeMetricFamily(
        "projektor_landing_queue_depth",
        "Open entries of a project's landing queue: queued, and the batch under test.",
        labels=["workspace", "project"],
    )
    outcomes_family = CounterMetricFamily(
        "projektor_landings",
        "Finished landing entries: landed, or rejected by reason (conflict, check_failed, "
        "stale_fence).",
        labels=["workspace", "project", "outcome"],
    )
    for project_id, workspace_id, key, _ in sorted(projects, key=lambda p: (p[1], p[2])):
        slug = slugs.get(workspace_id)
        if slug is None:  # a workspace made since the workspaces were read
            continue
        depth_family.add_metric([slug, key], depth[project_id])
        for outcome in landing_stats.OUTCOMES:
            outcomes_family.add_metric([slug, key, outcome], finished[(project_id, outcome)])
    return [depth_family, outcomes_family]
