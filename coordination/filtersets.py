"""One FilterSet per listed resource: the query parameters of docs/api.md. A list
selector (``coordination.selectors.*.*_list``) reads its query through one; the API's
view names the same FilterSet, so that the reference documents its parameters."""

from datetime import UTC
from typing import Any

import django_filters as filters
from django import forms
from django.db.models import Exists, OuterRef, Q, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from coordination.liveness import live_q, stalled_q
from coordination.models import (
    MAX_ID,
    AgentSession,
    ApiKey,
    ClaimConflict,
    FileClaim,
    Issue,
    IssueLease,
    Landing,
    Message,
    ReleaseReason,
    Resource,
    ResourceHold,
    Run,
    WipCapDenial,
)
from coordination.paths import ancestors, normalise_path, under_prefix


class StrictBooleanField(forms.Field):
    """``true``/``false`` (or absent); anything else is a 400, not a silently
    ignored filter (a select widget would turn ``maybe`` into "no filter")."""

    VALUES = {"true": True, "1": True, "false": False, "0": False}

    def to_python(self, value: Any) -> bool | None:
        if value in (None, ""):
            return None
        if isinstance(value, str) and value.lower() in self.VALUES:
            return self.VALUES[value.lower()]
        raise forms.ValidationError("Use true or false.", code="invalid")


class BooleanFilter(filters.BooleanFilter):
    field_class = StrictBooleanField


class UtcDateTimeField(filters.fields.IsoDateTimeField):
    """An ISO 8601 time, passed to the database in UTC: PostgreSQL refuses offsets
    past ±15:59 that Python accepts, and a time near year 1 or 9999 may not fit in
    UTC at all: both are a 400 here, not a database error."""

    def to_python(self, value: Any) -> Any:
        moment = super().to_python(value)
        if moment is None:
            return None
        try:
            return moment.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError("The time is out of range.", code="invalid") from None


class DateTimeFilter(filters.IsoDateTimeFilter):
    field_class = UtcDateTimeField


def id_filter(field_name: str) -> filters.NumberFilter:
    # Bounded so that an absurd id is a 400, not a database overflow.
    return filters.NumberFilter(field_name=field_name, min_value=1, max_value=MAX_ID)


class SessionFilter(filters.FilterSet):
    live = BooleanFilter(method="filter_live")
    stalled = BooleanFilter(method="filter_stalled")
    agent = filters.CharFilter(field_name="agent__name")
    role = filters.CharFilter(field_name="agent__role")

    class Meta:
        model = AgentSession
        fields: list[str] = []

    @extend_schema_field(OpenApiTypes.BOOL)  # a method filter: the schema cannot infer it
    def filter_live(
        self, queryset: QuerySet[AgentSession], name: str, value: Any
    ) -> QuerySet[AgentSession]:
        # The predicate itself, not the ``is_live`` annotation: this one the partial
        # index on active sessions' heartbeats serves, however many have ended.
        return queryset.filter(live_q()) if value else queryset.exclude(live_q())

    @extend_schema_field(OpenApiTypes.BOOL)
    def filter_stalled(
        self, queryset: QuerySet[AgentSession], name: str, value: Any
    ) -> QuerySet[AgentSession]:
        # Live and no progress for PROJEKTOR_STALL_AFTER_SECONDS (invariant 17 (stalled is
        # derived)).
        return queryset.filter(stalled_q()) if value else queryset.exclude(stalled_q())


class IssueFilter(filters.FilterSet):
    project = filters.CharFilter(field_name="project__key")
    status = filters.ChoiceFilter(choices=Issue.Status.choices)
    leased = BooleanFilter(method="filter_leased")

    class Meta:
        model = Issue
        fields: list[str] = []

    @extend_schema_field(OpenApiTypes.BOOL)
    def filter_leased(self, queryset: QuerySet[Issue], name: str, value: Any) -> QuerySet[Issue]:
        # "Leased" means a live holder: a dead holder's issue is free to claim.
        has_live_lease = Exists(IssueLease.objects.live().filter(issue=OuterRef("pk")))
        return queryset.filter(has_live_lease) if value else queryset.exclude(has_live_lease)


class LeaseFilter(filters.FilterSet):
    active = BooleanFilter(field_name="released_at", lookup_expr="isnull")
    project = filters.CharFilter(field_name="issue__project__key")
    session = id_filter("session")
    issue = id_filter("issue")
    release_reason = filters.CharFilter()

    class Meta:
        model = IssueLease
        fields: list[str] = []


class LandingFilter(filters.FilterSet):
    project = filters.CharFilter(field_name="project__key")
    state = filters.ChoiceFilter(choices=Landing.State.choices)
    issue = id_filter("issue")
    session = id_filter("session")

    class Meta:
        model = Landing
        fields: list[str] = []


class ResourceFilter(filters.FilterSet):
    name = filters.CharFilter()

    class Meta:
        model = Resource
        fields: list[str] = []


class ResourceHoldFilter(filters.FilterSet):
    active = BooleanFilter(field_name="released_at", lookup_expr="isnull")
    resource = filters.CharFilter(field_name="resource__name")
    session = id_filter("session")
    issue = id_filter("issue")
    release_reason = filters.CharFilter()

    class Meta:
        model = ResourceHold
        fields: list[str] = []


class WipCapDenialFilter(filters.FilterSet):
    since = DateTimeFilter(field_name="occurred_at", lookup_expr="gte")
    until = DateTimeFilter(field_name="occurred_at", lookup_expr="lt")
    project = filters.CharFilter(field_name="project__key")

    class Meta:
        model = WipCapDenial
        fields: list[str] = []


class KeyFilter(filters.FilterSet):
    kind = filters.ChoiceFilter(choices=ApiKey.Kind.choices)
    agent = filters.CharFilter(field_name="agent__name")
    # revoked=true: revoked keys; false: unrevoked ones (expired or not).
    revoked = BooleanFilter(field_name="revoked_at", lookup_expr="isnull", exclude=True)

    class Meta:
        model = ApiKey
        fields: list[str] = []


class RunFilter(filters.FilterSet):
    status = filters.ChoiceFilter(choices=Run.Status.choices)
    live = BooleanFilter(field_name="is_live")
    issue = id_filter("issue")
    session = id_filter("session")
    error = filters.ChoiceFilter(choices=Run.Error.choices)

    class Meta:
        model = Run
        fields: list[str] = []


# --- file claims, the contention log, messages -----------------------------------


class PathFilterSet(filters.FilterSet):
    """``?path=`` (exact, after normalisation: ``src/`` is the directory claim) and
    ``?path_prefix=``; a path that cannot be normalised is a 400 naming it, as in a
    claim body. Filters name rows, not claims to make: ``*`` is a character there."""

    path = filters.CharFilter(method="filter_path")
    path_prefix = filters.CharFilter(method="filter_path_prefix")

    def filter_path(self, queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return queryset.filter(path=normalise_path(value, literal=True))

    def filter_path_prefix(self, queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return under_prefix(queryset, "path", value)


class FileClaimFilter(PathFilterSet):
    active = BooleanFilter(field_name="released_at", lookup_expr="isnull")
    issue = id_filter("issue")
    session = id_filter("session")
    release_reason = filters.ChoiceFilter(choices=ReleaseReason.choices)
    covering = filters.CharFilter(method="filter_covering")

    class Meta:
        model = FileClaim
        fields: list[str] = []

    def filter_covering(
        self, queryset: QuerySet[FileClaim], name: str, value: str
    ) -> QuerySet[FileClaim]:
        """The unreleased claims that hold ``value`` (invariant 11 (overlap)): the path itself
        and each directory claim above it, found by equality on the index."""
        path = normalise_path(value, literal=True)
        return queryset.filter(released_at__isnull=True, path__in=[path, *ancestors(path)])


class ClaimConflictFilter(PathFilterSet):
    since = DateTimeFilter(field_name="occurred_at", lookup_expr="gte")
    until = DateTimeFilter(field_name="occurred_at", lookup_expr="lt")
    forced = BooleanFilter()
    # Either side of the conflict: the issue that was refused or the one that held.
    issue = filters.NumberFilter(method="filter_issue", min_value=1, max_value=MAX_ID)

    class Meta:
        model = ClaimConflict
        fields: list[str] = []

    def filter_issue(
        self, queryset: QuerySet[ClaimConflict], name: str, value: Any
    ) -> QuerySet[ClaimConflict]:
        return queryset.filter(Q(rejected_issue_id=value) | Q(holding_issue_id=value))


class MessageFilter(filters.FilterSet):
    scope = filters.CharFilter()
    since = DateTimeFilter(field_name="created_at", lookup_expr="gte")
    agent = filters.CharFilter(method="filter_agent", max_length=100)

    def filter_agent(self, queryset: QuerySet[Message], name: str, value: str) -> QuerySet[Message]:
        """What concerns the agent, in one call: posts to ``agent:<name>`` and to the
        issues it holds a live lease or a live file claim on."""
        leased = IssueLease.objects.live().filter(agent__name=value).values_list("issue_id")
        claimed = (
            FileClaim.objects.filter(released_at__isnull=True, agent__name=value)
            .filter(live_q("session__"))
            .values_list("issue_id")
        )
        issue_ids = {issue_id for (issue_id,) in leased.union(claimed)}
        scopes = [f"agent:{value}", *(f"issue:{issue_id}" for issue_id in sorted(issue_ids))]
        return queryset.filter(scope__in=scopes)

    class Meta:
        model = Message
        fields: list[str] = []
