"""Resources over REST (invariant 20 (resources are counted)): a 409 `resource_busy` names
its holders as the holds endpoint shows them, a repeat acquire answers the same hold
unchanged, and a bad call is a 400 that changes nothing."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework import serializers

from coordination.api.serializers.resources import HoldSerializer
from coordination.models import Event, ResourceHold, ResourceWait
from coordination.selectors import resources as selected
from coordination.services import resources
from tests.api_helpers import V1, assert_error, post

pytestmark = pytest.mark.django_db

HOLD_FIELDS = [
    "id",
    "resource",
    "session",
    "agent",
    "issue",
    "units",
    "slots",
    "acquired_at",
    "released_at",
    "release_reason",
    "live",
    "fence",
]


@pytest.fixture
def db_test(workspace):
    return resources.create_resource(workspace=workspace, name="db:test", capacity=3)


def acquire(api, session, **body):
    return post(api, "/resources/db:test/acquire/", {"session": session.pk, **body})


def changes(workspace):
    """What a call may change: holds, the line, events."""
    return (
        list(ResourceHold.objects.values_list("pk", "units", "released_at", "fence")),
        ResourceWait.objects.count(),
        Event.objects.filter(workspace=workspace).count(),
    )


def test_a_busy_resource_names_its_holders_as_the_holds_endpoint_shows_them(
    api, workspace, db_test, make_session, issue
):
    a, b, c = make_session("a"), make_session("b"), make_session("c")
    assert acquire(api, a, units=2, issue=issue.pk).status_code == 201
    assert acquire(api, b).status_code == 201
    busy = assert_error(acquire(api, c), 409, "resource_busy")
    listed = api.get(f"{V1}/resource-holds/?active=true&resource=db:test").json()["results"]
    shown = api.get(f"{V1}/resources/db:test/").json()
    assert busy["holders"] == shown["holders"] == listed[::-1]  # the list is newest first
    assert [list(hold) for hold in busy["holders"]] == [HOLD_FIELDS, HOLD_FIELDS]
    first = busy["holders"][0]
    assert (first["agent"], first["issue"], first["slots"], first["live"]) == (
        "a",
        issue.pk,
        [0, 1],
        True,
    )
    assert (busy["available"], busy["waiting"]) == (shown["available"], shown["waiting"])
    event = Event.objects.get(type="resource.refused")
    assert event.data["holders"] == busy["holders"]


def test_a_refusals_statements_do_not_grow_with_its_holders(api, workspace, make_session):
    """The holders are rendered from the rows read under the lock: one holder or three,
    the same statements."""
    api.get(f"{V1}/resources/")  # the key, read once
    counts = []
    for holders in (1, 3):
        name = f"pool-{holders}"
        resources.create_resource(workspace=workspace, name=name, capacity=holders)
        for n in range(holders):
            session = make_session(f"{name}-{n}")
            resources.acquire(workspace=workspace, name=name, session_id=session.pk)
        late = make_session(f"{name}-late")
        with CaptureQueriesContext(connection) as statements:
            refused = post(api, f"/resources/{name}/acquire/", {"session": late.pk})
        assert_error(refused, 409, "resource_busy")
        assert len(refused.json()["holders"]) == holders
        counts.append(len(statements))
    assert counts[0] == counts[1], counts


def test_a_hold_renders_as_the_serializers_declared_fields_render_it(
    workspace, db_test, make_session, issue
):
    """``shown_hold`` writes the hold's mapping out (the REST hold, the 409's holders,
    the event's): live, released, with and without an agent or an issue."""
    a, b = make_session("a"), make_session("b")
    resources.acquire(workspace=workspace, name="db:test", session_id=a.pk, issue_id=issue.pk)
    resources.acquire(workspace=workspace, name="db:test", session_id=b.pk, units=2)
    resources.release(workspace=workspace, name="db:test", session_id=a.pk)
    ResourceHold.objects.filter(session=b).update(agent=None)
    holds = list(selected.holds(workspace))
    for hold in holds:
        drf = dict(serializers.ModelSerializer.to_representation(HoldSerializer(), hold))
        assert HoldSerializer(hold).data == drf
    assert {hold.is_live for hold in holds} == {True, False}


def test_a_waiting_call_that_runs_out_counts_its_own_place_as_the_get_shows_it(
    api, workspace, db_test, make_session
):
    a, b = make_session("a"), make_session("b")
    assert acquire(api, a, units=3).status_code == 201
    ran_out = assert_error(acquire(api, b, wait=0.2), 409, "resource_busy")
    assert (ran_out["available"], ran_out["waiting"]) == (0, 1)  # its own place in line
    assert api.get(f"{V1}/resources/db:test/").json()["waiting"] == 0  # left as it answered
    assert Event.objects.get(type="resource.refused").data["waiting"] == 1


def test_a_repeat_acquire_of_the_same_session_answers_200_and_the_same_hold_unchanged(
    api, workspace, db_test, make_session, issue
):
    a = make_session("a")
    first = acquire(api, a, units=1)
    assert first.status_code == 201
    before = changes(workspace)
    for body in ({}, {"units": 3, "issue": issue.pk}, {"units": 2, "wait": 5}):
        again = acquire(api, a, **body)
        assert again.status_code == 200, again.content
        assert again.json() == first.json()  # its units, slots, issue and fence
    assert changes(workspace) == before  # no new hold, no event


@pytest.mark.parametrize(
    "body",
    [
        {"units": 0},
        {"units": -1},
        {"units": 4},  # over the capacity, 3
        {"wait": -1},
        {"wait": 61},
        {"units": 4, "wait": 5},
    ],
)
def test_bad_units_or_wait_are_a_400_that_changes_nothing(
    api, workspace, db_test, make_session, body
):
    a, b = make_session("a"), make_session("b")
    assert acquire(api, a).status_code == 201
    before = changes(workspace)
    refused = assert_error(acquire(api, b, **body), 400, "invalid")
    assert set(body) & {*refused.get("errors", {}), refused.get("field")}, refused
    assert changes(workspace) == before
