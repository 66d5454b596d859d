"""Requests that sleep let others run: the app server's active-request gate.

A call that waits (a long poll of the event log, a call in a resource's line) sleeps in
its request's thread. Under gunicorn's gthread workers a thread per waiter would leave
none for the heartbeats and claims that keep the fleet alive, so the server runs more
threads than it lets work at once: a ``Gate`` per process lets ``active`` requests run,
and a request that sleeps inside ``idle()`` gives its place up until it wakes. The gate
is installed by the app server's middleware (``projektor.operations.active``); without
it (the development server, the tests, the command line) ``idle()`` does nothing.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class Place:
    """A running request's place; ``slept`` once it gave the place up to sleep."""

    gate: "Gate"
    slept: bool = False


class Gate:
    def __init__(self, active: int) -> None:
        self.active = active
        self._places = threading.BoundedSemaphore(active)

    @contextmanager
    def running(self) -> Iterator[Place]:
        """A request's run, in one of the ``active`` places."""
        self._places.acquire()
        place = Place(self)
        token = _place.set(place)
        try:
            yield place
        finally:
            _place.reset(token)
            self._places.release()


_place: ContextVar[Place | None] = ContextVar("active_request_place", default=None)


@contextmanager
def idle() -> Iterator[None]:
    """Sleep inside this block: the request's place goes to another while it does. Hold no
    database transaction or row lock here: the place may go to a request that needs it."""
    place = _place.get()
    if place is None:
        yield
        return
    place.slept = True
    place.gate._places.release()
    try:
        yield
    finally:
        place.gate._places.acquire()
