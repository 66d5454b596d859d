"""One FilterSet per listed resource: the query parameters of API.md."""

from typing import Any

import django_filters as filters
from django.db.models import Exists, OuterRef, QuerySet

from coordination.api.serializers import MAX_ID
from coordination.models import AgentSession, Issue, IssueLease, Run, WipCapDenial


def id_filter(field_name: str) -> filters.NumberFilter:
    # Bounded so that an absurd id is a 400, not a database overflow.
    return filters.NumberFilter(field_name=field_name, min_value=1, max_value=MAX_ID)


class SessionFilter(filters.FilterSet):
    live = filters.BooleanFilter(field_name="is_live")
    agent = filters.CharFilter(field_name="agent__name")
    role = filters.CharFilter(field_name="agent__role")

    class Meta:
        model = AgentSession
        fields: list[str] = []


class IssueFilter(filters.FilterSet):
    project = filters.CharFilter(field_name="project__key")
    status = filters.ChoiceFilter(choices=Issue.Status.choices)
    leased = filters.BooleanFilter(method="filter_leased")

    class Meta:
        model = Issue
        fields: list[str] = []

    def filter_leased(self, queryset: QuerySet[Issue], name: str, value: Any) -> QuerySet[Issue]:
        # "Leased" means a live holder: a dead holder's issue is free to claim.
        has_live_lease = Exists(IssueLease.objects.live().filter(issue=OuterRef("pk")))
        return queryset.filter(has_live_lease) if value else queryset.exclude(has_live_lease)


class LeaseFilter(filters.FilterSet):
    active = filters.BooleanFilter(field_name="released_at", lookup_expr="isnull")
    project = filters.CharFilter(field_name="issue__project__key")
    session = id_filter("session")
    issue = id_filter("issue")
    release_reason = filters.CharFilter()

    class Meta:
        model = IssueLease
        fields: list[str] = []


class WipCapDenialFilter(filters.FilterSet):
    since = filters.IsoDateTimeFilter(field_name="occurred_at", lookup_expr="gte")
    until = filters.IsoDateTimeFilter(field_name="occurred_at", lookup_expr="lt")
    project = filters.CharFilter(field_name="project__key")

    class Meta:
        model = WipCapDenial
        fields: list[str] = []


class RunFilter(filters.FilterSet):
    status = filters.ChoiceFilter(choices=Run.Status.choices)
    issue = id_filter("issue")
    session = id_filter("session")
    error = filters.ChoiceFilter(choices=Run.Error.choices)

    class Meta:
        model = Run
        fields: list[str] = []
