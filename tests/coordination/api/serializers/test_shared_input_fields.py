"""SharedInputFields: the agents' hot input serializers validate with fields bound once
per class and ``partial`` flag, with exactly DRF's outcome (the data or the errors),
from many threads at once; a field that reads the context, or a nested serializer, is
refused when the set binds."""

import threading
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework import serializers

from coordination.api import serializers as s
from coordination.api.serializers.base import SharedInputFields
from coordination.api.serializers.fields import IdField, StrictCharField
from coordination.api.serializers.sessions import ProgressInput
from coordination.models import MAX_ID
from coordination.services import file_claims
from tests.coordination.api.serializers.test_base import subclasses


def as_drf(serializer_class: type) -> type:
    """``serializer_class`` with DRF's own per-instance fields: the reference."""
    fields = serializers.Serializer.__dict__["fields"]
    return type(f"Drf{serializer_class.__name__}", (serializer_class,), {"fields": fields})


def outcome(serializer_class: type, body: Any, **kwargs: Any) -> tuple[bool, Any]:
    serializer = serializer_class(data=body, **kwargs)
    if serializer.is_valid():
        return True, dict(serializer.validated_data)
    return False, serializer.errors


PATHS = ["src/a.py", "src/"]
BODIES: dict[type, list[Any]] = {
    s.FileClaimInput: [
        {"issue": 1, "paths": PATHS},
        {"issue": 1, "paths": PATHS, "session": 2, "force": True, "fence": 3},
        {"issue": 1, "paths": PATHS, "session": None, "fence": None},
        {"issue": 1, "paths": []},
        {"issue": 1, "paths": ["a"] * (file_claims.MAX_PATHS + 1)},
        {"issue": 1, "paths": [1, None, "ok"]},
        {"issue": "1", "paths": "src/a.py", "force": "yes", "fence": 3.0},
        {"issue": 0, "paths": PATHS, "session": MAX_ID + 1, "fence": True},
        {},
        [],
        "text",
    ],
    s.FileReleaseInput: [
        {"issue": 7},
        {"issue": 7, "paths": PATHS, "session": 2},
        {"issue": 7, "paths": [], "session": "x"},
        {"paths": PATHS},
    ],
    s.FileCheckInput: [
        {"issue": 7, "paths": ["a*", "b?"]},
        {"issue": 7, "paths": ["a"] * (file_claims.MAX_CHECK_PATHS + 1)},
        {"issue": -1},
    ],
    s.SessionRegisterInput: [
        {},
        {"agent": "atlas", "role": "", "department": "payments", "worktree": "wt-main"},
        {"agent": 5, "role": "r" * 101, "worktree": ""},
    ],
    s.StartWorkInput: [
        {"issue": 3, "agent": "atlas", "paths": PATHS},
        {"issue": None, "paths": [None]},
    ],
    ProgressInput: [{}, {"note": ""}, {"note": "n" * 501}, {"note": ["x"]}],
    s.SessionRefInput: [{"session": 12}, {"session": 0}, {}],
    s.LeaseReleaseInput: [{"session": 12}, {"session": "12"}],
}


def test_the_hot_inputs_share_their_fields_and_every_sharer_binds():
    sharers = subclasses(SharedInputFields)
    assert set(BODIES) <= sharers
    for serializer_class in sharers:
        for partial in (False, True):
            assert serializer_class.shared_fields(partial), serializer_class
        assert serializer_class.shared_fields(False) is serializer_class(data={}).fields


@pytest.mark.parametrize(
    ("serializer_class", "body"),
    [(cls, body) for cls, bodies in BODIES.items() for body in bodies],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_validation_is_drfs_to_the_letter(serializer_class, body):
    shared = outcome(serializer_class, body)
    assert shared == outcome(as_drf(serializer_class), body)
    assert shared == outcome(serializer_class, body)  # nothing left behind by the first


class Patchable(SharedInputFields, serializers.Serializer):
    name = StrictCharField(max_length=10)
    size = IdField(required=False)


def test_a_partial_body_skips_the_absent_required_fields_and_a_full_one_does_not():
    assert outcome(Patchable, {"size": 2}, partial=True) == (True, {"size": 2})
    assert outcome(Patchable, {"size": 2}) == outcome(as_drf(Patchable), {"size": 2})
    assert outcome(Patchable, {"size": 2})[0] is False
    assert Patchable.shared_fields(True) is not Patchable.shared_fields(False)


def test_threads_validating_at_once_each_get_their_own_outcome():
    bodies = [
        {"issue": n, "paths": [f"src/{n}/{k}.py" for k in range(n % 5 + 1)], "session": n}
        if n % 3
        else {"issue": n, "paths": [n]}
        for n in range(1, 25)
    ]
    expected = [outcome(as_drf(s.FileClaimInput), body) for body in bodies]
    start = threading.Barrier(len(bodies))
    wrong: list[Any] = []

    def validate(index: int) -> None:
        start.wait()
        for _ in range(200):
            got = outcome(s.FileClaimInput, bodies[index])
            if got != expected[index]:
                wrong.append((index, got))
                return

    threads = [threading.Thread(target=validate, args=(n,)) for n in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert sum(ok for ok, _ in expected) == 16  # both kinds raced: valid and refused


class ContextReading(serializers.CharField):
    def to_internal_value(self, data: Any) -> str:
        return str(self.context["request"]) + data


def sharer(**fields: Any) -> type:
    return type("Probe", (SharedInputFields, serializers.Serializer), fields)


@pytest.mark.parametrize(
    "make",
    [
        lambda: sharer(who=ContextReading()),
        lambda: sharer(by=serializers.HiddenField(default=serializers.CurrentUserDefault())),
        lambda: sharer(report=s.ReportSerializer()),
        lambda: sharer(sessions=s.SessionRefInput(many=True)),
    ],
    ids=["context reader", "context default", "nested", "nested list"],
)
def test_a_field_that_cannot_be_shared_is_refused_when_it_binds(make):
    with pytest.raises(ImproperlyConfigured, match="SharedInputFields"):
        make()(data={}).is_valid()
