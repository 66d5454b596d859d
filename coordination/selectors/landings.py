"""The landing queue as the API and the pages show it (invariant 21 (the default branch
is always green)): each entry with its place in its project's queue."""

from collections.abc import Mapping
from typing import Any

from django.db.models import Case, Count, IntegerField, OuterRef, QuerySet, Subquery, When

from coordination.filtersets import LandingFilter
from coordination.models import Landing, Workspace
from coordination.selectors.filtering import filtered


def place_in_queue() -> Subquery:
    """An entry's 1-based place in its project's queue: the open entries up to it, in
    order of arrival (the batch under test first, as it came first)."""
    ahead = (
        Landing.objects.filter(
            project=OuterRef("project"), state__in=Landing.OPEN, pk__lte=OuterRef("pk")
        )
        .order_by()
        .values("project")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Subquery(ahead, output_field=IntegerField())


def landings(workspace: Workspace) -> QuerySet[Landing]:
    """In order of arrival; ``place``: an open entry's place in its project's queue,
    None once closed."""
    return (
        Landing.objects.filter(workspace=workspace)
        .annotate(
            place=Case(
                When(state__in=Landing.OPEN, then=place_in_queue()),
                default=None,
                output_field=IntegerField(),
            )
        )
        .select_related("project", "agent", "tester_agent")
        .order_by("pk")
    )


def landing_list(
    *, workspace: Workspace, filters: Mapping[str, Any] | None = None
) -> QuerySet[Landing]:
    return filtered(LandingFilter, landings(workspace), filters)


def shown(workspace: Workspace, landing: Landing) -> Landing:
    return landings(workspace).get(pk=landing.pk)
