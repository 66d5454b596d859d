"""List filters shared by the coordination admins: liveness by the one TTL predicate."""

from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from coordination.liveness import live_q


class LiveFilter(admin.SimpleListFilter):
    """Live / not live, by the one liveness predicate (TTL setting)."""

    title = "live"
    parameter_name = "live"
    session_prefix = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Live"), ("no", "Not live")]

    def live_condition(self) -> Q:
        return live_q(self.session_prefix)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "yes":
            return queryset.filter(self.live_condition())
        if self.value() == "no":
            return queryset.exclude(self.live_condition())
        return queryset


class HolderLiveFilter(LiveFilter):
    """For leases, claims and locks: unreleased and held by a live session."""

    title = "live holder"
    session_prefix = "session__"

    def live_condition(self) -> Q:
        return Q(released_at__isnull=True) & live_q(self.session_prefix)
