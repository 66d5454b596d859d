"""Resources: counted holds with slots, liveness as a lease's, waiting in order
(invariant 20 (resources are counted))."""

import threading
import time

import pytest
from django.db import connections

from coordination.errors import (
    HoldNotHeld,
    InvalidInput,
    NotFound,
    ResourceBusy,
    SessionNotLive,
    StaleFence,
)
from coordination.models import Event, Message, ReleaseReason, ResourceHold, ResourceWait
from coordination.selectors.resources import shown_hold
from coordination.services import agents, resource_line, resources
from tests.conftest import expire

pytestmark = pytest.mark.django_db


@pytest.fixture
def db_test(workspace):
    return resources.create_resource(workspace=workspace, name="db:test", capacity=3)


def acquire(workspace, session, units=1, name="db:test", **kwargs):
    return resources.acquire(
        workspace=workspace, name=name, session_id=session.pk, units=units, **kwargs
    )


def live_slots(resource):
    return sorted(
        slot
        for hold in ResourceHold.objects.live().filter(resource=resource)
        for slot in hold.slots
    )


def test_units_are_distinct_slots_lowest_first_and_never_more_than_the_capacity(
    workspace, db_test, make_session
):
    a, b, c = make_session("a"), make_session("b"), make_session("c")
    first = acquire(workspace, a, units=2)
    assert first.created and first.hold.slots == [0, 1] and first.hold.fence == 1
    with pytest.raises(ResourceBusy) as refused:
        acquire(workspace, b, units=2)
    body = refused.value.as_dict()
    assert body["code"] == "resource_busy" and body["available"] == 1 and body["waiting"] == 0
    assert body["holders"] == [shown_hold(resources.fresh(first.hold))]  # the API's hold
    second = acquire(workspace, c)
    assert second.hold.slots == [2] and second.hold.fence == 2
    resources.release(workspace=workspace, name="db:test", session_id=a.pk)
    third = acquire(workspace, b, units=2)
    assert third.hold.slots == [0, 1] and third.hold.fence == 3  # the lowest free ones
    assert live_slots(db_test) == [0, 1, 2]


def test_a_second_acquire_of_the_same_session_answers_its_hold_unchanged(
    workspace, db_test, make_session
):
    a = make_session("a")
    first = acquire(workspace, a)
    again = acquire(workspace, a, units=3)
    assert not again.created and again.hold.pk == first.hold.pk and again.hold.units == 1


def test_a_dead_sessions_units_are_available_at_once_and_taken_back_expired_when_needed(
    workspace, db_test, make_session
):
    dead, other, late = make_session("dead"), make_session("other"), make_session("late")
    held = acquire(workspace, dead, units=2).hold
    acquire(workspace, other)
    expire(dead)
    shown = resources.get_resource(workspace, "db:test")
    assert resources.live_holds(shown)[0].session_id == other.pk
    granted = acquire(workspace, late, units=2)
    assert granted.hold.slots == [0, 1]
    assert [hold.pk for hold in granted.taken_back] == [held.pk]
    held.refresh_from_db()
    assert held.release_reason == ReleaseReason.EXPIRED and held.released_at is not None
    released = Event.objects.get(type="resource.released", session_id=dead.pk)
    assert released.data["reason"] == "expired" and released.data["by"]["agent"] == "late"


def test_end_agent_releases_holds_agent_ended(workspace, db_test, make_session):
    a = make_session("a")
    hold = acquire(workspace, a).hold
    agents.end_session(workspace=workspace, session_id=a.pk)
    hold.refresh_from_db()
    assert hold.release_reason == ReleaseReason.AGENT_ENDED


def test_release_is_fenced_and_refused_when_nothing_is_held(workspace, db_test, make_session):
    a = make_session("a")
    hold = acquire(workspace, a).hold
    with pytest.raises(StaleFence):
        resources.release(workspace=workspace, name="db:test", session_id=a.pk, fence=99)
    released = resources.release(
        workspace=workspace, name="db:test", session_id=a.pk, fence=hold.fence
    )
    assert released.release_reason == ReleaseReason.RELEASED and not released.is_live
    with pytest.raises(HoldNotHeld):
        resources.release(workspace=workspace, name="db:test", session_id=a.pk)


def test_a_session_that_is_not_live_is_refused(workspace, db_test, make_session):
    a = make_session("a")
    expire(a)
    with pytest.raises(SessionNotLive):
        acquire(workspace, a)
    assert not ResourceHold.objects.exists()


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"units": 0}, InvalidInput),
        ({"units": 4}, InvalidInput),
        ({"wait": 61}, InvalidInput),
        ({"wait": -1}, InvalidInput),
        ({"name": "nope"}, NotFound),
        ({"issue_id": 999_999}, NotFound),
    ],
)
def test_bad_calls_change_nothing(workspace, db_test, make_session, kwargs, error):
    with pytest.raises(error):
        acquire(workspace, make_session("a"), **kwargs)
    assert not ResourceHold.objects.exists() and not ResourceWait.objects.exists()


@pytest.mark.parametrize("name", ["", "Upper", "-lead", "a" * 65, "sp ace", "x/y"])
def test_bad_names_are_refused(workspace, name):
    with pytest.raises(InvalidInput):
        resources.create_resource(workspace=workspace, name=name)


@pytest.mark.parametrize("capacity", [0, -1, 10_001])
def test_bad_capacities_are_refused(workspace, capacity):
    with pytest.raises(InvalidInput):
        resources.create_resource(workspace=workspace, name="ports", capacity=capacity)


def test_a_name_is_unique_in_its_workspace_only(workspace, other_workspace):
    resources.create_resource(workspace=workspace, name="ports")
    with pytest.raises(InvalidInput):
        resources.create_resource(workspace=workspace, name="ports")
    resources.create_resource(workspace=other_workspace, name="ports")
    with pytest.raises(NotFound):
        resources.get_resource(other_workspace, "db:test")


def test_a_lowered_capacity_keeps_the_holds_and_grants_nothing_until_they_fit(
    workspace, db_test, make_session
):
    a, b, c = make_session("a"), make_session("b"), make_session("c")
    acquire(workspace, a, units=2)
    resources.update_resource(workspace=workspace, name="db:test", capacity=1)
    with pytest.raises(ResourceBusy) as refused:
        acquire(workspace, b)
    assert refused.value.extra["available"] == 0
    resources.release(workspace=workspace, name="db:test", session_id=a.pk)
    assert acquire(workspace, c).hold.slots == [0]


def test_events_name_the_resource_and_a_refusal_its_holders(workspace, db_test, make_session):
    a, b = make_session("a"), make_session("b")
    acquire(workspace, a, units=3)
    with pytest.raises(ResourceBusy):
        acquire(workspace, b)
    acquired = Event.objects.get(type="resource.acquired")
    assert acquired.data["resource"] == "db:test" and acquired.data["slots"] == [0, 1, 2]
    refusal = Event.objects.get(type="resource.refused")
    assert refusal.session_id == b.pk and refusal.data["holders"][0]["agent"] == "a"
    [held] = ResourceHold.objects.all()
    assert refusal.data["holders"] == [shown_hold(resources.fresh(held))]


@pytest.mark.django_db(transaction=True)
def test_a_waiting_call_is_served_when_the_units_come_back(workspace, make_session):
    resources.create_resource(workspace=workspace, name="ports", capacity=1)
    holder, waiter = make_session("holder"), make_session("waiter")
    acquire(workspace, holder, name="ports")
    results: list = []
    thread = in_a_thread(results, lambda: acquire(workspace, waiter, name="ports", wait=30))
    try:
        wait_until(lambda: ResourceWait.objects.filter(session=waiter).exists())
        shown = resources.get_resource(workspace, "ports")
        assert resource_line.live_waits(shown).count() == 1
        resources.release(workspace=workspace, name="ports", session_id=holder.pk)
    finally:
        thread.join(timeout=60)
    [granted] = results
    assert not isinstance(granted, Exception), granted
    assert granted.hold.session_id == waiter.pk and granted.hold.slots == [0]
    assert not ResourceWait.objects.exists()  # the call left the line


@pytest.mark.django_db(transaction=True)
def test_a_later_call_gets_nothing_while_an_earlier_one_waits(workspace, make_session):
    """First come, first served: the call needing two units is not starved by one that
    needs one, even with one unit free."""
    resources.create_resource(workspace=workspace, name="ports", capacity=2)
    holder, big, small = make_session("holder"), make_session("big"), make_session("small")
    acquire(workspace, holder, name="ports")
    results: list = []
    thread = in_a_thread(results, lambda: acquire(workspace, big, name="ports", units=2, wait=30))
    try:
        wait_until(lambda: ResourceWait.objects.filter(session=big).exists())
        with pytest.raises(ResourceBusy) as refused:
            acquire(workspace, small, name="ports")
        assert refused.value.extra["available"] == 1 and refused.value.extra["waiting"] == 1
        with pytest.raises(ResourceBusy) as ran_out:
            acquire(workspace, small, name="ports", wait=0.2)
        # As the resource's GET shows it at that moment: the call waiting ahead and this
        # call's own place in line, which it leaves as it answers.
        assert ran_out.value.extra["waiting"] == 2
        assert resource_line.live_waits(resources.get_resource(workspace, "ports")).count() == 1
        resources.release(workspace=workspace, name="ports", session_id=holder.pk)
    finally:
        thread.join(timeout=60)
    assert results and results[0].hold.slots == [0, 1]


@pytest.mark.django_db(transaction=True)
def test_a_waiter_whose_session_dies_leaves_the_line(workspace, make_session):
    resources.create_resource(workspace=workspace, name="ports", capacity=1)
    holder, doomed, next_one = make_session("holder"), make_session("doomed"), make_session("n")
    acquire(workspace, holder, name="ports")
    results: list = []
    thread = in_a_thread(results, lambda: acquire(workspace, doomed, name="ports", wait=30))
    try:
        wait_until(lambda: ResourceWait.objects.filter(session=doomed).exists())
        expire(doomed)
        resources.release(workspace=workspace, name="ports", session_id=holder.pk)
        assert acquire(workspace, next_one, name="ports").hold.session_id == next_one.pk
    finally:
        thread.join(timeout=60)
    assert isinstance(results[0], SessionNotLive | ResourceBusy)


def test_a_waiting_call_that_runs_out_writes_one_refusal(workspace, db_test, make_session):
    a, b = make_session("a"), make_session("b")
    acquire(workspace, a, units=3)
    with pytest.raises(ResourceBusy) as refused:
        acquire(workspace, b, wait=0.3)
    # "waiting" as the resource's GET showed it as the call ran out: its own place.
    assert refused.value.extra["waiting"] == 1 and "1 call(s) waiting" in str(refused.value)
    [event] = Event.objects.filter(type="resource.refused")
    assert event.data["waiting"] == 1
    assert not ResourceWait.objects.exists()


def in_a_thread(results, call):
    """``call()`` in a thread of its own, with its own connection (closed at the end);
    what it returned or raised goes to ``results``."""

    def run():
        try:
            results.append(call())
        except Exception as error:  # noqa: BLE001 - the test asserts on it
            results.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def wait_until(condition, timeout=30.0):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "the condition never held"
        time.sleep(0.01)


def test_an_operators_force_release_frees_the_units_and_tells_the_holder(
    workspace, db_test, make_session, issue
):
    a, b = make_session("a"), make_session("b")
    hold = acquire(workspace, a, units=3, issue_id=issue.pk).hold
    assert resources.force_release(hold=hold, operator="ops")
    hold.refresh_from_db()
    assert hold.release_reason == ReleaseReason.RELEASED
    released = Event.objects.get(type="resource.released")
    assert released.data["operator"] == "ops" and released.session_id == a.pk
    told = {message.scope: message.body for message in Message.objects.all()}
    assert set(told) == {"agent:a", f"issue:{issue.pk}"}
    assert "db:test" in told["agent:a"] and "ops" in told["agent:a"]
    assert acquire(workspace, b, units=3).created  # the units are free
    assert not resources.force_release(hold=hold, operator="ops")  # once only
    assert str(hold) == f"db:test · hold {hold.pk}"
