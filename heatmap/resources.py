"""Resources as the managers' pages show them (invariant 20 (resources are counted)):
each resource now, with its holders and its line, the refusals per day, and what an
agent or an issue holds.

Reads only, a fixed handful of statements however many resources and holds: the
resources with their live holds and line (``coordination.selectors.resources``), and
the refusals counted per UTC day and resource by the database.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet
from django.db.models.fields.json import KT

from coordination.models import Agent, Event, EventType, Issue, ResourceHold, Workspace
from coordination.selectors import resources as selected
from heatmap.health import DailySeries, days_of, per_day


@dataclass(frozen=True)
class ResourceNow:
    """A resource as it stands: ``in_use`` units of ``capacity`` in its live ``holders``
    (oldest first), ``waiting`` calls in its line, and ``refused`` calls in the window."""

    name: str
    capacity: int
    description: str
    in_use: int
    holders: list[ResourceHold]
    waiting: int
    refused: int

    @property
    def full(self) -> bool:
        """Nothing is granted now: every unit is held (or more, after a lowered capacity)."""
        return self.in_use >= self.capacity


@dataclass(frozen=True)
class ResourcesNow:
    resources: list[ResourceNow]
    refusals: DailySeries  # one series per resource, by name

    @property
    def refused(self) -> int:
        return self.refusals.total


def refusals_per_day(
    workspace: Workspace, names: list[str], since: datetime, until: datetime
) -> DailySeries:
    """``resource.refused`` events per UTC day, one series per resource name (a call
    refused ``resource_busy``, once per call), from the event log: a window older than
    its retention (``PROJEKTOR_EVENT_RETENTION_DAYS``) finds none. The log has no index
    by type or time, so this reads the workspace's kept events (the retention's, at
    most) and counts the window's refusals among them."""
    refusals = Event.objects.filter(workspace=workspace, type=EventType.RESOURCE_REFUSED).annotate(
        resource=KT("data__resource")
    )
    return per_day(
        refusals,
        time_field="occurred_at",
        kind_field="resource",
        kinds={name: name for name in names},
        since=since,
        until=until,
    )


def resources_now(workspace: Workspace, since: datetime, until: datetime) -> ResourcesNow:
    """Every resource of the workspace, by name, and its refusals in the window."""
    rows = list(selected.resources(workspace))
    if not rows:  # nothing to count: no statement for the log
        return ResourcesNow(resources=[], refusals=DailySeries(days_of(since, until), {}))
    refusals = refusals_per_day(workspace, [row.name for row in rows], since, until)
    return ResourcesNow(
        resources=[
            ResourceNow(
                name=row.name,
                capacity=row.capacity,
                description=row.description,
                in_use=selected.in_use(row),
                holders=list(row.live_holds),  # type: ignore[attr-defined]
                waiting=row.waiting,  # type: ignore[attr-defined]
                refused=sum(refusals.series[row.name]),
            )
            for row in rows
        ],
        refusals=refusals,
    )


def live_holds(workspace: Workspace) -> QuerySet[ResourceHold]:
    """Live holds, by resource name: what the pages say is held now (a dead session's
    units are available at once, so its unreleased hold is not one of them)."""
    return (
        ResourceHold.objects.live()
        .filter(workspace=workspace)
        .select_related("resource", "agent", "issue")
        .order_by("resource__name", "pk")
    )


def agent_holds(workspace: Workspace, agent: Agent) -> list[ResourceHold]:
    return list(live_holds(workspace).filter(agent=agent)[:100])


def issue_holds(workspace: Workspace, issue: Issue) -> list[ResourceHold]:
    return list(live_holds(workspace).filter(issue=issue)[:100])


def slot_words(slots: list[int]) -> str:
    """``slot 0``, ``slots 0–3``, ``slots 0, 2–4``: runs of slot numbers as ranges."""
    numbers = sorted(int(slot) for slot in slots)
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    said = ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}\u2013{run[-1]}" for run in runs)
    return f"slot {said}" if len(numbers) == 1 else f"slots {said}"
