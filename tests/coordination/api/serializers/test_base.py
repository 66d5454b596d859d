"""FieldsBoundOnce: every output serializer binds its fields once, and a field that
reads the context (which bound-once fields see empty) is refused when it binds."""

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from rest_framework import serializers

from coordination.api import serializers as s
from coordination.api.serializers.base import FieldsBoundOnce


def subclasses(cls: type) -> set[type]:
    """The project's subclasses of ``cls`` (not the probes below)."""
    found = {sub for sub in cls.__subclasses__() if sub.__module__.startswith("coordination.")}
    for sub in list(found):
        found |= subclasses(sub)
    return found


def test_every_output_serializer_binds_once():
    bound = subclasses(FieldsBoundOnce)
    assert {
        s.SessionSerializer,
        s.LeaseSerializer,
        s.IssueSerializer,
        s.QueuedIssueSerializer,
        s.FileClaimSerializer,
        s.ClaimedFilesSerializer,
    } <= bound
    for serializer_class in bound:
        assert serializer_class.bound_fields(), serializer_class


class ContextReader(serializers.Field):
    def to_representation(self, value: Any) -> Any:
        return self.context.get("request") and value


class Reporting(serializers.Serializer):
    by = serializers.SerializerMethodField()

    def get_by(self, report: Any) -> Any:
        return self.context["request"].user


def probe(field: Any, **methods: Any) -> Any:
    return type("Probe", (FieldsBoundOnce, serializers.Serializer), {"probe": field, **methods})


def get_probe_by_context(self: Any, row: Any) -> Any:
    return self.context["request"]


REFUSED = {
    "a method field reading self.context": lambda: probe(
        serializers.SerializerMethodField(), get_probe=get_probe_by_context
    ),
    "a hyperlink": lambda: probe(
        serializers.HyperlinkedRelatedField(view_name="x", read_only=True)
    ),
    "hyperlinks": lambda: probe(
        serializers.HyperlinkedRelatedField(view_name="x", read_only=True, many=True)
    ),
    "an identity link": lambda: probe(serializers.HyperlinkedIdentityField(view_name="x")),
    "a file URL": lambda: probe(serializers.FileField(read_only=True)),
    "the current user as default": lambda: probe(
        serializers.CharField(default=serializers.CurrentUserDefault())
    ),
    "a field class of our own": lambda: probe(ContextReader()),
    "a list of those": lambda: probe(serializers.ListField(child=ContextReader())),
    "a nested serializer that reads it": lambda: probe(Reporting()),
    "nested serializers that read it": lambda: probe(Reporting(many=True)),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_field_that_reads_the_context_is_refused(case):
    serializer_class = REFUSED[case]()
    for _ in range(2):  # refused every time, never bound
        with pytest.raises(ImproperlyConfigured, match=r"Probe\.probe: .*empty context"):
            serializer_class.bound_fields()


def test_a_method_field_that_reads_only_the_row_binds():
    serializer_class = probe(
        serializers.SerializerMethodField(), get_probe=lambda self, row: row["n"] + 1
    )
    assert serializer_class({"n": 1}).data == {"probe": 2}


class Stamped(FieldsBoundOnce, serializers.Serializer):
    plain = serializers.DateTimeField()
    formatted = serializers.DateTimeField(format="%Y-%m-%d %H:%M")
    kept = serializers.DateTimeField(format=None)
    zoned = serializers.DateTimeField(default_timezone=ZoneInfo("Asia/Tokyo"))


STAMPS = [
    datetime(2026, 12, 5, 3, 4, 5, 123456, tzinfo=UTC),
    datetime(2026, 12, 5, 3, 4, 5, tzinfo=ZoneInfo("Europe/Berlin")),
    datetime(2026, 12, 5, 3, 4, 5),  # naive: DRF makes it aware in the current zone
    "2026-12-05T03:04:05Z",  # a string: DRF passes it on
]


@pytest.mark.parametrize("stamp", STAMPS)
@pytest.mark.parametrize("current", ["UTC", "America/New_York"])
def test_datetimes_render_as_drfs_fields_render_them(stamp, current):
    row = SimpleNamespace(plain=stamp, formatted=stamp, kept=stamp, zoned=stamp)
    with timezone.override(ZoneInfo(current)):
        drf = serializers.Serializer.to_representation(Stamped(), row)
        assert Stamped(row).data == drf
    assert [as_iso for _, _, as_iso in Stamped.rendering_plan()] == [True, False, False, False]
