"""Resources as the API and the pages show them: what is in use, who holds, who waits
(invariant 20 (resources are counted)); and the holds, released or not."""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db.models import Count, OuterRef, Prefetch, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from coordination.filtersets import ResourceFilter, ResourceHoldFilter
from coordination.liveness import DbNow, live_q
from coordination.models import Resource, ResourceHold, ResourceWait, Workspace
from coordination.selectors.filtering import filtered


def resources(workspace: Workspace) -> QuerySet[Resource]:
    """Each resource with ``live_holds`` (its holders, oldest first) and ``waiting`` (the
    calls in its line now); ``in_use`` and ``available`` follow from them."""
    waiting = (
        ResourceWait.objects.filter(resource=OuterRef("pk"), deadline__gt=DbNow())
        .filter(live_q("session__"))
        .order_by()
        .values("resource")
        .annotate(n=Count("pk"))
        .values("n")
    )
    holders = (
        ResourceHold.objects.live()
        .with_live()
        .select_related("agent", "resource", "issue")
        .order_by("acquired_at", "pk")
    )
    return (
        Resource.objects.filter(workspace=workspace)
        .annotate(waiting=Coalesce(Subquery(waiting), 0))
        .prefetch_related(Prefetch("holds", queryset=holders, to_attr="live_holds"))
        .order_by("name")
    )


def resource_list(*, workspace: Workspace, filters: Mapping[str, Any] | None = None) -> Any:
    return filtered(ResourceFilter, resources(workspace), filters)


def holds(workspace: Workspace) -> QuerySet[ResourceHold]:
    return (
        ResourceHold.objects.filter(workspace=workspace)
        .with_live()
        .select_related("agent", "resource")
        .order_by("-id")
    )


def hold_list(
    *, workspace: Workspace, filters: Mapping[str, Any] | None = None
) -> QuerySet[ResourceHold]:
    return filtered(ResourceHoldFilter, holds(workspace), filters)


def in_use(resource: Resource) -> int:
    return sum(hold.units for hold in getattr(resource, "live_holds", []))


def available(resource: Resource) -> int:
    return max(0, resource.capacity - in_use(resource))


def shown_hold(hold: ResourceHold) -> dict[str, Any]:
    """A hold as the API shows it, the one rendering of the REST hold, of each holder
    in a 409 ``resource_busy`` and of ``data.holders`` in ``resource.refused``: JSON as it
    is (times as DRF renders them), from a row with ``is_live`` (``with_live()``), its
    ``resource`` and its ``agent`` at hand, so a list of holders costs no statement."""
    return {
        "id": hold.pk,
        "resource": hold.resource.name,
        "session": hold.session_id,
        "agent": hold.agent.name if hold.agent is not None else None,
        "issue": hold.issue_id,
        "units": hold.units,
        "slots": list(hold.slots),
        "acquired_at": iso(hold.acquired_at),
        "released_at": iso(hold.released_at),
        "release_reason": hold.release_reason or None,
        "live": bool(hold.is_live),
        "fence": hold.fence,
    }


def iso(value: datetime | None) -> str | None:
    """As DRF's DateTimeField renders an aware datetime: ISO 8601 in the current time
    zone, UTC written ``Z``."""
    if value is None:
        return None
    text = timezone.localtime(value).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
