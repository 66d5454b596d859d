"""Races for resources, on both databases: real threads, each with its own connection and
live session (invariant 20 (resources are counted)).

On PostgreSQL every grant is decided under the resource's row lock; on SQLite under the
database's single writer. Either way: never more units in live holds than the capacity,
no slot in two live holds, and waiting calls served in order of arrival.
"""

import threading
import time

import pytest
from django.db import connections

from coordination.errors import ResourceBusy
from coordination.models import ResourceHold, ResourceWait
from coordination.services import agents, resources
from tests.coordination.races.conftest import run_in_threads

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 64
ROUNDS = 3


def acquire(workspace, name, session_id, units=1, wait=0):
    return resources.acquire(
        workspace=workspace, name=name, session_id=session_id, units=units, wait=wait
    )


def test_64_acquirers_of_a_capacity_3_resource_get_exactly_3_grants_on_slots_0_1_2(
    workspace, make_session
):
    sessions = [make_session(f"agent-{n}") for n in range(THREADS)]
    for round_number in range(ROUNDS):
        for session in sessions:  # a live fleet: the rounds may outlast the TTL
            agents.heartbeat_session(workspace=workspace, session_id=session.pk)
        name = f"db:round-{round_number}"
        resource = resources.create_resource(workspace=workspace, name=name, capacity=3)

        results = run_in_threads(acquire, [(workspace, name, s.pk) for s in sessions])

        granted = [r for r in results if isinstance(r, resources.Granted)]
        busy = [r for r in results if isinstance(r, ResourceBusy)]
        assert len(granted) == 3 and len(busy) == THREADS - 3, [
            r for r in results if not isinstance(r, resources.Granted | ResourceBusy)
        ]
        assert sorted(slot for g in granted for slot in g.hold.slots) == [0, 1, 2]
        assert sorted(g.hold.fence for g in granted) == [1, 2, 3]
        live = ResourceHold.objects.live().filter(resource=resource)
        assert sum(live.values_list("units", flat=True)) == 3


def test_waiters_are_served_in_order_of_arrival_while_later_calls_get_nothing(
    workspace, make_session
):
    """A holder, then waiters joining the line one after another (a big one among small
    ones); each waiter, once served, releases. Meanwhile callers that do not wait try
    all along: every one is refused while anyone waits. The grants follow the arrivals."""
    resources.create_resource(workspace=workspace, name="ports", capacity=2)
    holder = make_session("holder")
    acquire(workspace, "ports", holder.pk, units=2)
    wants = [1, 2, 1, 1, 2, 1, 1, 1]
    waiters = [make_session(f"waiter-{n}") for n in range(len(wants))]
    served: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def wait_then_release(session, units):
        try:
            acquire(workspace, "ports", session.pk, units=units, wait=55)
            with lock:
                served.append(session.agent.name)
            resources.release(workspace=workspace, name="ports", session_id=session.pk)
        except BaseException as error:  # noqa: BLE001 - asserted below
            errors.append(error)
        finally:
            connections.close_all()

    threads = []
    for session, units in zip(waiters, wants, strict=True):
        thread = threading.Thread(target=wait_then_release, args=(session, units))
        thread.start()
        threads.append(thread)
        wait_until(lambda s=session: ResourceWait.objects.filter(session=s).exists())

    pushers = [make_session(f"pusher-{n}") for n in range(4)]
    stop = threading.Event()
    pushed: list[object] = []

    def push(session):
        try:
            while not stop.is_set():
                try:
                    granted = acquire(workspace, "ports", session.pk)
                except ResourceBusy:
                    continue
                pushed.append(granted)  # only once the line is empty
                resources.release(workspace=workspace, name="ports", session_id=session.pk)
        finally:
            connections.close_all()

    pushing = [threading.Thread(target=push, args=(s,)) for s in pushers]
    for thread in pushing:
        thread.start()
    resources.release(workspace=workspace, name="ports", session_id=holder.pk)
    for thread in threads:
        thread.join(timeout=120)
    stop.set()
    for thread in pushing:
        thread.join(timeout=60)
    assert not errors, errors
    assert sorted(served) == sorted(session.agent.name for session in waiters)
    # Fences number the grants: the waiters' follow their arrivals, and no call that did
    # not wait got units before the last waiter did.
    fence_of = dict(
        ResourceHold.objects.filter(session__in=waiters).values_list("session_id", "fence")
    )
    in_arrival_order = [fence_of[session.pk] for session in waiters]
    assert in_arrival_order == sorted(in_arrival_order), in_arrival_order
    pusher_fences = ResourceHold.objects.filter(session__in=pushers).values_list("fence", flat=True)
    assert not pusher_fences or min(pusher_fences) > max(in_arrival_order)
    assert not ResourceWait.objects.exists()
    assert ResourceHold.objects.live().count() == 0


def wait_until(condition, timeout=60.0):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "the condition never held"
        time.sleep(0.01)
