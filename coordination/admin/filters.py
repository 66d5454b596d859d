"""List filters shared by the coordination admins, by the one TTL predicate."""

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from coordination.liveness import live_q, stalled_q


class StateFilter(admin.SimpleListFilter):
    """Choices mapped to conditions; subclasses name them. A condition that reads a
    setting is a function, so that it reads it when the list is asked for."""

    conditions: dict[str, tuple[str, Q | Callable[[], Q]]] = {}

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, label) for value, (label, _) in self.conditions.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        chosen = self.conditions.get(self.value() or "")
        if not chosen:
            return queryset
        condition = chosen[1]
        return queryset.filter(condition if isinstance(condition, Q) else condition())


class SessionStateFilter(StateFilter):
    """Live (heartbeat within the TTL), stalled (live, no progress: invariant 17 (stalled is
    derived)), stale (active but silent: crashed), ended."""

    title = "state"
    parameter_name = "state"
    conditions = {
        "live": ("Live", live_q()),
        "stalled": ("Stalled (live, no progress)", stalled_q),
        "stale": ("Stale (stopped heartbeating)", Q(status="active") & ~live_q()),
        "ended": ("Ended", Q(status="ended")),
    }


class HolderStateFilter(StateFilter):
    """For leases, claims and locks: held by a live session, held by a dead one
    (reclaimable by the next claimer), or released."""

    title = "holder"
    parameter_name = "holder"
    conditions = {
        "live": ("Held, holder live", Q(released_at__isnull=True) & live_q("session__")),
        "stale": (
            "Held, holder not live",
            Q(released_at__isnull=True) & ~(Q(session__isnull=False) & live_q("session__")),
        ),
        "released": ("Released", Q(released_at__isnull=False)),
    }


class ClaimKindFilter(StateFilter):
    """File claims by kind: a directory (``src/api/``: its whole subtree, invariant 11 (overlap))
    or a single file."""

    title = "kind"
    parameter_name = "kind"
    conditions = {
        "directory": ("Directory (holds its subtree)", Q(path__endswith="/")),
        "file": ("File", ~Q(path__endswith="/")),
    }


class RunLiveFilter(StateFilter):
    title = "live"
    parameter_name = "live"
    conditions = {
        "yes": ("Running, session live", Q(status="running") & live_q("session__")),
        "no": ("Not live", ~(Q(status="running") & live_q("session__"))),
    }
