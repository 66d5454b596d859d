"""Fields every resource's serializers share: strict JSON input types, bounded ids
and fences, and the blank-as-null choices of the output."""

from datetime import datetime
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from coordination.models import MAX_ID, ReleaseReason


class IdField(serializers.IntegerField):
    """A row id: positive and within bigint, so a huge number is a 400, not a DB error."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(**kwargs)


class FenceField(serializers.IntegerField):
    """An optional fence (docs/api.md, "Fences"): a positive JSON integer within the
    column's range; ``"3"``, ``3.0`` or ``true`` are type errors, not fences. ``null``
    is the same as no fence."""

    MAX = 2**31 - 1

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", self.MAX)
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """Only JSON integers: ``"3"``, ``3.0`` or ``true`` are type errors, not numbers."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true/false: ``"yes"`` or ``1`` are type errors, not booleans."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictCharField(serializers.CharField):
    """Only JSON strings: a number or a list is a type error, not coerced to text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictChoiceField(serializers.ChoiceField):
    """A choice given as its JSON type: ``"1"`` is not the priority 1."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, int | str):
            self.fail("invalid_choice", input=data)
        if isinstance(data, str) and any(isinstance(key, int) for key in self.choices):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class SlugRefField(StrictCharField):
    """A reference by slug/name to another row of the workspace; resolved by services."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 100)
        super().__init__(**kwargs)


class BlankAsNullChoiceField(serializers.ChoiceField):
    """A choice column stored blank when it has no value; the API says ``null``."""

    def __init__(self, choices: Any, **kwargs: Any) -> None:
        super().__init__(choices=choices, allow_null=True, read_only=True, **kwargs)

    def to_representation(self, value: Any) -> Any:
        return value or None


class ReleaseReasonField(BlankAsNullChoiceField):
    """Blank while unreleased: ``null`` then, like ``released_at``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(ReleaseReason.choices, **kwargs)


def iso_datetime(value: datetime | None) -> str | None:
    """An aware datetime as DRF's ``DateTimeField`` renders it by default: ISO 8601 in
    the current time zone, UTC written ``Z``; ``None`` stays ``None``."""
    if value is None:
        return None
    text = timezone.localtime(value).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
