"""Serializers whose fields are bound once per class: the output serializers that
render with them, and the agents' hot input serializers that validate with them."""

import types
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from rest_framework import ISO_8601, serializers
from rest_framework.fields import DateTimeField, DictField, Field, SkipField
from rest_framework.relations import HyperlinkedRelatedField, ManyRelatedField, PKOnlyObject
from rest_framework.settings import api_settings
from rest_framework.utils.serializer_helpers import BindingDict

from coordination.api.serializers.fields import iso_datetime


class FieldsBoundOnce:
    """Fields bound once per class, shared by every response in every thread.

    DRF deep-copies and binds a serializer's fields for each instance: for a small
    response that is most of its rendering time (a session: 0.19 ms, 0.035 ms bound
    once). Here they are bound once, to an instance with an empty context, and then
    only read: rendering changes no field, so threads can share them (two binding at
    once each build a set, and either serves). A field that read the context would
    see that empty one, not the request's, so binding refuses it. Output only: input
    serializers share theirs through ``SharedInputFields``.
    """

    @classmethod
    def bound_fields(cls) -> Sequence[Field]:
        fields = cls.__dict__.get("_bound_fields")
        if fields is None:
            readable = cls().fields.values()  # type: ignore[attr-defined]
            fields = [field for field in readable if not field.write_only]
            for field in fields:
                refuse_context_readers(cls, field)
            cls._bound_fields = fields  # type: ignore[attr-defined]
        return fields

    @classmethod
    def rendering_plan(cls) -> Sequence[tuple[Field, str, bool]]:
        """Each bound field, its name, and whether it is DRF's DateTimeField at its
        defaults (ISO 8601, the current time zone): those render an aware datetime with
        ``iso_datetime``, DRF's own steps without its lookups (a third of a session's
        rendering)."""
        plan = cls.__dict__.get("_rendering_plan")
        if plan is None:
            plan = [
                (field, str(field.field_name), plain_datetime(field))
                for field in cls.bound_fields()
            ]
            cls._rendering_plan = plan  # type: ignore[attr-defined]
        return plan

    def to_representation(self, instance: Any) -> dict[str, Any]:
        # DRF's Serializer.to_representation, over the fields bound once.
        rendered: dict[str, Any] = {}
        for field, name, as_iso in self.rendering_plan():
            try:
                attribute = field.get_attribute(instance)
            except SkipField:
                continue
            value = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
            if value is None:
                rendered[name] = None
            elif as_iso and isinstance(value, datetime) and value.utcoffset() is not None:
                rendered[name] = iso_datetime(value)
            else:
                rendered[name] = field.to_representation(attribute)
        return rendered


def plain_datetime(field: Field) -> bool:
    """DRF's own DateTimeField, rendering ISO 8601 in the current time zone."""
    output_format = getattr(field, "format", api_settings.DATETIME_FORMAT)
    return (
        type(field) is DateTimeField
        and isinstance(output_format, str)
        and output_format.lower() == ISO_8601
        and not hasattr(field, "timezone")
    )


class SharedInputFields:
    """An input serializer that validates with one set of bound fields per class (and
    per ``partial`` flag), shared by every request in every thread.

    DRF deep-copies and binds a serializer's fields for each instance: for a claim's
    body that copy is about a tenth of the request (``docs/speed.md``). Validation only
    reads the fields: DRF keeps the data, the errors and the validated data on the
    serializer instance, and ``validate``/``validate_<field>`` run on it too. The one
    thing a field reads from its root is ``partial`` (an absent field is skipped in a
    partial update), hence one set per flag, bound to a root made with it. A field that
    would read the context, or a nested serializer (a list of them sets its child's
    ``instance`` while validating), is refused when the set is bound.
    """

    partial: bool

    @property
    def fields(self) -> Any:
        return type(self).shared_fields(bool(self.partial))

    @classmethod
    def shared_fields(cls, partial: bool) -> Any:
        sets = cls.__dict__.get("_shared_fields")
        if sets is None:
            sets = {}
            cls._shared_fields = sets  # type: ignore[attr-defined]
        fields = sets.get(partial)
        if fields is None:
            root = cls(partial=partial)  # type: ignore[call-arg]
            fields = BindingDict(root)  # type: ignore[arg-type]  # as DRF binds them, once
            for name, field in root.get_fields().items():  # type: ignore[attr-defined]
                fields[name] = field
            for field in fields.values():
                refuse_context_readers(cls, field)
                refuse_nested_serializers(cls, field)
            sets[partial] = fields  # two threads binding at once each build a set: either serves
        return fields


def refuse_nested_serializers(owner: type, field: Field) -> None:
    for each in nested_fields(field):
        if isinstance(each, serializers.BaseSerializer):
            raise ImproperlyConfigured(
                f"{owner.__name__}.{field.field_name}: a nested serializer keeps state while "
                "it validates, so its fields cannot be shared (SharedInputFields)."
            )


# DRF's own fields whose output depends on the request in the context (URLs).
REQUEST_READERS = (HyperlinkedRelatedField, serializers.FileField)


def refuse_context_readers(owner: type, field: Field) -> None:
    """ImproperlyConfigured if ``field`` (or a field nested in it) reads the context."""
    for each in nested_fields(field):
        reason = context_use(each)
        if reason is not None:
            raise ImproperlyConfigured(
                f"{owner.__name__}.{field.field_name}: {reason}, but fields bound once "
                "see an empty context (FieldsBoundOnce, SharedInputFields)."
            )


def nested_fields(field: Field) -> Iterator[Field]:
    """``field`` and every field it renders through: list children, nested serializers."""
    yield field
    if isinstance(field, FieldsBoundOnce):
        type(field).bound_fields()  # checked as its own class binds
    elif isinstance(field, ManyRelatedField):
        yield from nested_fields(field.child_relation)
    elif isinstance(field, serializers.ListSerializer | serializers.ListField | DictField):
        if field.child is not None:
            yield from nested_fields(field.child)
    elif isinstance(field, serializers.Serializer):
        for child in field.fields.values():  # bound now, before any thread renders
            yield from nested_fields(child)


def context_use(field: Field) -> str | None:
    """How ``field`` depends on the serializer's context, or None if it does not."""
    if isinstance(field, REQUEST_READERS):
        return f"{type(field).__name__} builds URLs from the request in the context"
    if getattr(field.default, "requires_context", False):
        return f"its default {type(field.default).__name__} reads the context"
    if isinstance(field, serializers.SerializerMethodField):
        method = getattr(field.parent, str(field.method_name))
        if reads_context(method):
            return f"{field.method_name}() reads self.context"
    if isinstance(field, FieldsBoundOnce):
        return None  # its own fields are checked as its class binds
    for klass in type(field).__mro__:  # a field class of our own that reads it
        if klass.__module__.startswith(("rest_framework.", "builtins")):
            continue
        for name, member in vars(klass).items():
            if reads_context(getattr(member, "fget", member)):  # methods and properties
                return f"{type(field).__name__}.{name}() reads self.context"
    return None


def reads_context(function: Callable[..., Any]) -> bool:
    """Whether ``function``'s code (or code nested in it) names ``context``."""
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    return code is not None and names_context(code)


def names_context(code: types.CodeType) -> bool:
    return "context" in code.co_names or any(
        names_context(const) for const in code.co_consts if isinstance(const, types.CodeType)
    )
