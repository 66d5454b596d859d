"""The line of a resource: calls waiting for its units, first come, first served
(invariant 20 (resources are counted)).

Waiting, in order: a call with ``wait`` puts a row in the resource's line
(``ResourceWait``, committed at once so every app process sees it) and is served
only when no live call ahead of it waits; a call without ``wait`` is served only when
nobody waits. A waiter sleeps between looks giving its place among the server's working
requests up (``coordination.idle``), woken by any commit that wrote events
(``feed.wakeups``: this process's at once, another's through PostgreSQL's NOTIFY) and
looking at most once per ``HEAD_LOOK_SECONDS`` × its place in line (up to
``LINE_LOOK_SECONDS``): the head, the only one that can be served, looks every
``HEAD_LOOK_SECONDS`` and takes the lock only when the units fit; the others look when a
commit wakes them, or after ``QUIET_LOOK_SECONDS``. The few nearest the front keep their
connection between looks (no transaction); the others close it, so a long line holds
few connections.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from datetime import timedelta

from django.db.models import QuerySet

from coordination import feed
from coordination.errors import SessionNotLive
from coordination.idle import idle
from coordination.liveness import DbNow, live_q
from coordination.models import AgentSession, Resource, ResourceHold, ResourceWait

# A waiter looks at most once per HEAD_LOOK_SECONDS × its place in line (the head, which
# is served as soon as units are free, most often), up to once per LINE_LOOK_SECONDS,
# however often commits wake it.
HEAD_LOOK_SECONDS = 0.05
LINE_LOOK_SECONDS = 1.0
QUIET_LOOK_SECONDS = 5.0  # behind the head, with no commit to wake it
KEPT_CONNECTION_PLACES = 5  # the head and the few behind it keep their connection


def live_waits(resource: Resource) -> QuerySet[ResourceWait]:
    """The line: calls waiting now, first come first."""
    return (
        ResourceWait.objects.filter(resource=resource, deadline__gt=DbNow())
        .filter(live_q("session__"))
        .order_by("pk")
    )


def turns(resource: Resource, session: AgentSession, *, units: int, wait: float) -> Generator[int]:
    """Join the line and yield this call's row in it (the id ``attempt`` takes as ``line``)
    each time the call may try: at the head of the line with its units free, and once
    more when ``wait`` has run out (the last try: the generator ends after it). The row
    leaves the line when the generator is closed, whatever the outcome."""
    end = time.monotonic() + wait
    line = ResourceWait.objects.create(
        workspace_id=resource.workspace_id,
        resource=resource,
        session=session,
        units=units,
        deadline=DbNow() + timedelta(seconds=wait + 1),
    ).pk
    try:
        while True:
            seen = feed.wakeups.generation()  # before the look: a commit after it wakes us
            looked = time.monotonic()
            place = place_in_line(resource, line, session)
            if place == 1 and could_fit(resource, units):
                yield line
            elif not AgentSession.objects.filter(live_q(), pk=session.pk).exists():
                raise SessionNotLive(f"Session {session.pk} stopped being live while it waited.")
            remaining = end - time.monotonic()
            if remaining <= 0:
                yield line
                return
            # The head looks most often, and each place behind it less: the line moves
            # one grant at a time, and a waiter far back has time before its turn. Only
            # the head looks unwoken soon; the others wait for a commit (a grant, a
            # release) or, at the longest, QUIET_LOOK_SECONDS.
            interval = min(LINE_LOOK_SECONDS, HEAD_LOOK_SECONDS * place)
            unwoken = HEAD_LOOK_SECONDS if place == 1 else QUIET_LOOK_SECONDS
            if place > KEPT_CONNECTION_PLACES:  # near the front it looks again soon
                feed.release_connection()
            with idle():  # another request runs meanwhile
                feed.wakeups.wait(seen, timeout=min(remaining, unwoken))
                time.sleep(max(0.0, min(looked + interval, end) - time.monotonic()))
    finally:
        ResourceWait.objects.filter(pk=line).delete()


def place_in_line(resource: Resource, line: int, session: AgentSession) -> int:
    """1 for the head: the live calls of other sessions waiting ahead of this one, plus one
    (a cheap look, no lock)."""
    return live_waits(resource).exclude(session=session).filter(pk__lt=line).count() + 1


def could_fit(resource: Resource, units: int) -> bool:
    capacity = Resource.objects.filter(pk=resource.pk).values_list("capacity", flat=True).first()
    held = sum(
        ResourceHold.objects.live().filter(resource=resource).values_list("units", flat=True)
    )
    return capacity is not None and held + units <= capacity
