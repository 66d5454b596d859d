"""Query parameters read through a FilterSet, as every filtered list reads them."""

from collections.abc import Mapping
from typing import Any, TypeVar

import django_filters as filters
from django.db.models import Model, QuerySet

from coordination.errors import InvalidInput

M = TypeVar("M", bound=Model)


def checked(filterset: filters.FilterSet) -> dict[str, Any]:
    """What ``filterset`` read of its query, or a 400 naming the first bad parameter
    (``detail``) and every one of them (``errors``), as DRF words a validation error."""
    if filterset.is_valid():
        return dict(filterset.form.cleaned_data)
    errors = {field: list(messages) for field, messages in filterset.errors.items()}
    field, messages = next(iter(errors.items()))
    raise InvalidInput(f"{field}: {messages[0]}", errors=errors)


def filtered(
    filterset_class: type[filters.FilterSet], rows: QuerySet[M], query: Mapping[str, Any] | None
) -> QuerySet[M]:
    """``rows`` narrowed by ``query`` (None or empty: all of them)."""
    filterset = filterset_class(query or {}, queryset=rows)
    checked(filterset)
    return filterset.qs  # type: ignore[no-any-return]
