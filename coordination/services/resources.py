"""Resources: counted holds on what is not a file (invariant 20 (resources are counted)).

A hold lives exactly as a lease does: live while it is unreleased and its session is
live (invariant 1 (liveness)), so a dead session's units are available at once and
the next acquirer that needs its slots takes them back ``expired`` in its own call
(invariant 4 (stale reclaim): no sweeper). Every grant is made under the resource's
row lock (PostgreSQL; on SQLite every write transaction is already alone), so what
is in use is read and the new hold written as one step: never more units in live
holds than the capacity, never one slot in two live holds.

Waiting, in order (``resource_line``): a call with ``wait`` joins the resource's line
and tries again, under the same lock, each time its turn comes; only the live calls
ahead of it hold it back, and a call without ``wait`` is served only when nobody waits.
"""

from __future__ import annotations

import re
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Max, Q

from coordination import actors, feed
from coordination.errors import (
    HoldNotHeld,
    InvalidInput,
    NotFound,
    ResourceBusy,
    SessionNotLive,
)
from coordination.liveness import DbNow, live_q
from coordination.models import (
    AgentSession,
    EventType,
    ReleaseReason,
    Resource,
    ResourceHold,
    ResourceWait,
    Workspace,
)
from coordination.models.resources import MAX_CAPACITY, NAME_PATTERN
from coordination.selectors import lookups
from coordination.selectors.resources import shown_hold
from coordination.selectors.sessions import is_live
from coordination.services import events, fences, messages, resource_line

MAX_WAIT_SECONDS = 60
NAME_HINT = "1 to 64 of a-z, 0-9 and . _ : -, starting with a letter or a digit"


# --- the resource itself --------------------------------------------------------------------


def create_resource(
    *, workspace: Workspace, name: str, capacity: int = 1, description: str = ""
) -> Resource:
    check_name(name)
    check_capacity(capacity)
    try:
        with transaction.atomic():
            return Resource.objects.create(
                workspace=workspace, name=name, capacity=capacity, description=description
            )
    except IntegrityError:
        raise InvalidInput(f"A resource named {name!r} exists already.", field="name") from None


def update_resource(
    *,
    workspace: Workspace,
    name: str,
    capacity: int | None = None,
    description: str | None = None,
) -> Resource:
    """A new capacity counts from the next grant: lowered below what is held, the live
    holds keep their units and nothing is granted until they fit again."""
    changes: dict[str, Any] = {}
    if capacity is not None:
        check_capacity(capacity)
        changes["capacity"] = capacity
    if description is not None:
        changes["description"] = description
    resource = get_resource(workspace, name)
    if changes:
        Resource.objects.filter(pk=resource.pk).update(**changes)
        # A raised capacity may serve calls waiting on any app server: wake them all.
        feed.committed([workspace.pk])
    return get_resource(workspace, name)


def get_resource(workspace: Workspace, name: str) -> Resource:
    resource = Resource.objects.filter(workspace=workspace, name=name).first()
    if resource is None:
        raise NotFound("No resource of this workspace has that name.")
    return resource


def check_name(name: str) -> None:
    if not re.fullmatch(NAME_PATTERN, name):
        raise InvalidInput(f"A resource's name is {NAME_HINT}.", field="name")


def check_capacity(capacity: int) -> None:
    if not 1 <= capacity <= MAX_CAPACITY:
        raise InvalidInput(f"capacity is 1 to {MAX_CAPACITY}.", field="capacity")


# --- what a call sees ------------------------------------------------------------------------


def live_holds(resource: Resource) -> list[ResourceHold]:
    return list(
        ResourceHold.objects.live()
        .filter(resource=resource)
        .select_related("agent")
        .order_by("acquired_at", "pk")
    )


@dataclass
class Refusal:
    """Why a call got nothing: the resource as it stood."""

    resource: Resource
    holders: list[ResourceHold]  # read under the lock, each with its resource and agent
    available: int
    waiting: int

    def shown_holders(self) -> list[dict[str, Any]]:
        """The holders as the API shows a hold (the 409's and the event's)."""
        return [shown_hold(hold) for hold in self.holders]

    def error(self, units: int) -> ResourceBusy:
        names = ", ".join(
            f"{hold.agent.name if hold.agent else 'a session'} ({hold.units})"
            for hold in self.holders
        )
        detail = (
            f"Resource {self.resource.name!r} has {self.available} of {self.resource.capacity} "
            f"units free for {units}"
            + (f"; {self.waiting} call(s) waiting in line" if self.waiting else "")
            + (f"; held by {names}." if names else ".")
        )
        return ResourceBusy(
            detail,
            resource=self.resource.name,
            holders=self.shown_holders(),
            available=self.available,
            waiting=self.waiting,
        )


@dataclass
class Granted:
    hold: ResourceHold
    created: bool
    taken_back: list[ResourceHold] = field(default_factory=list)


# --- acquire -----------------------------------------------------------------------------------


def acquire(
    *,
    workspace: Workspace,
    name: str,
    session_id: int,
    units: int = 1,
    issue_id: int | None = None,
    wait: float = 0,
) -> Granted:
    """Take ``units`` of the resource for a live session, waiting up to ``wait`` seconds
    in the resource's line. The session's unreleased hold of it, if it has one, comes back
    unchanged (``created`` false). Raises ``ResourceBusy`` when refused, having recorded
    ``resource.refused`` (one per call)."""
    resource = get_resource(workspace, name)
    if not 1 <= units <= resource.capacity:
        raise InvalidInput(f"units is 1 to the capacity, {resource.capacity}.", field="units")
    if not 0 <= wait <= MAX_WAIT_SECONDS:
        raise InvalidInput(f"wait is 0 to {MAX_WAIT_SECONDS} seconds.", field="wait")
    session = lookups.get_session(workspace, session_id)
    issue = lookups.get_issue(workspace, issue_id) if issue_id is not None else None
    outcome = attempt(resource, session, units=units, issue_id=issue_id, line=None)
    if isinstance(outcome, Refusal) and wait > 0:
        outcome = wait_in_line(resource, session, units=units, issue_id=issue_id, wait=wait)
    if isinstance(outcome, Refusal):
        refused(outcome, session, units=units, issue_id=issue.pk if issue else None)
        raise outcome.error(units)
    return outcome


def attempt(
    resource: Resource,
    session: AgentSession,
    *,
    units: int,
    issue_id: int | None,
    line: int | None,
) -> Granted | Refusal:
    """One try, in its own transaction, under the resource's lock. ``line``: the id of
    this call's row in the line (only the calls ahead of it hold it back)."""
    with events.change():
        locked = Resource.objects.select_for_update(no_key=True).get(pk=resource.pk)
        if not is_live(session):
            raise SessionNotLive(f"Session {session.pk} is not live.")
        holds = list(
            ResourceHold.objects.unreleased()
            .filter(resource=locked)
            .with_live()
            .select_related("agent")
            .order_by("acquired_at", "pk")
        )
        for hold in holds:
            hold.resource = locked
        mine = next((hold for hold in holds if hold.session_id == session.pk), None)
        if mine is not None:
            return Granted(hold=mine, created=False)
        live = [hold for hold in holds if hold.is_live]
        in_use = sum(hold.units for hold in live)
        available = max(0, locked.capacity - in_use)
        others_waiting = resource_line.live_waits(locked).exclude(session=session)
        ahead = others_waiting.filter(pk__lt=line) if line is not None else others_waiting
        if ahead.exists() or units > available:
            # As the resource's GET shows it now: a waiting call's own place counts.
            return Refusal(
                locked, live, available, waiting=resource_line.live_waits(locked).count()
            )
        taken = {slot for hold in live for slot in hold.slots}
        slots = [slot for slot in range(locked.capacity) if slot not in taken][:units]
        in_the_way = [hold for hold in holds if not hold.is_live and set(hold.slots) & set(slots)]
        taken_back = take_back(in_the_way, by=session)
        if line is not None:
            ResourceWait.objects.filter(pk=line).delete()
        newest = ResourceHold.objects.filter(resource=locked).aggregate(top=Max("fence"))["top"]
        hold = ResourceHold.objects.create(
            workspace_id=locked.workspace_id,
            resource=locked,
            session=session,
            agent_id=session.agent_id,
            issue_id=issue_id,
            units=units,
            slots=slots,
            fence=(newest or 0) + 1,
        )
        hold.agent, hold.is_live = session.agent, True  # acquired_at: from the INSERT
        resource_event(hold, EventType.RESOURCE_ACQUIRED, {"units": units, "slots": slots})
        return Granted(hold=hold, created=True, taken_back=taken_back)


def wait_in_line(
    resource: Resource, session: AgentSession, *, units: int, issue_id: int | None, wait: float
) -> Granted | Refusal:
    """Wait in the resource's line for this call's turn and its units, up to ``wait``
    seconds: granted at a turn, or refused at the last."""
    outcome: Granted | Refusal | None = None
    with closing(resource_line.turns(resource, session, units=units, wait=wait)) as turns:
        for line in turns:
            outcome = attempt(resource, session, units=units, issue_id=issue_id, line=line)
            if isinstance(outcome, Granted):
                break
    if outcome is None:  # never: the line's last turn comes whatever happens
        raise RuntimeError("The line ended without a last turn.")
    return outcome


def refused(refusal: Refusal, session: AgentSession, *, units: int, issue_id: int | None) -> None:
    """The one ``resource.refused`` of a call that got nothing."""
    with events.change():
        events.record(
            refusal.resource.workspace_id,
            EventType.RESOURCE_REFUSED,
            issue_id=issue_id,
            session_id=session.pk,
            agent_id=session.agent_id,
            data={
                "resource": refusal.resource.name,
                "units": units,
                "available": refusal.available,
                "waiting": refusal.waiting,
                "holders": refusal.shown_holders(),
            },
        )


# --- release -----------------------------------------------------------------------------------


def release(
    *, workspace: Workspace, name: str, session_id: int, fence: int | None = None
) -> ResourceHold:
    """Release the session's unreleased hold of the resource as ``released``; with
    ``fence``, only if it is that hold's (``stale_fence`` otherwise)."""
    resource = get_resource(workspace, name)
    session = lookups.get_session(workspace, session_id)
    with events.change():
        hold = (
            ResourceHold.objects.unreleased()
            .select_for_update(no_key=True, of=("self",))
            .select_related("resource", "agent")
            .filter(resource=resource, session=session)
            .first()
        )
        if hold is None:
            raise HoldNotHeld(f"Session {session.pk} holds no units of {name!r}.")
        fences.check(fences.HoldFence(resource.pk, session.pk), fence)
        end_holds([hold], reason=ReleaseReason.RELEASED)
    return fresh(hold)


def release_session_holds(*, session: AgentSession, reason: str) -> None:
    """Every unreleased hold of the session (an end: ``agent_ended``). Inside a change."""
    holds = list(
        ResourceHold.objects.unreleased()
        .select_for_update(no_key=True, of=("self",))
        .select_related("resource")
        .filter(session=session)
        .order_by("resource_id")
    )
    end_holds(holds, reason=reason)


def force_release(*, hold: ResourceHold, operator: str) -> bool:
    """An operator's release (the admin): ``released``, the person named in the event, and
    the holder told (its agent, and the issue the hold served), as a forced lease is."""
    with events.change():
        locked = (
            ResourceHold.objects.unreleased()
            .select_for_update(no_key=True, of=("self",))
            .select_related("resource", "agent", "workspace")
            .filter(pk=hold.pk)
            .first()
        )
        if locked is None:
            return False
        end_holds([locked], reason=ReleaseReason.RELEASED, extra={"operator": operator})
        body = (
            f"{actors.operator(operator).at_sentence_start} released the hold {locked.pk} of "
            f"{locked.units} unit(s) of {locked.resource.name} (slots "
            f"{', '.join(map(str, locked.slots))}): they may be another's now."
        )
        scopes = [f"agent:{locked.agent.name}"] if locked.agent is not None else []
        scopes += [messages.issue_scope(locked.issue_id)] if locked.issue_id else []
        for scope in scopes:
            messages.record_message(
                workspace=locked.workspace,
                scope=scope,
                body=body,
                session=None,
                operator=operator,
            )
    return True


def take_back(holds: list[ResourceHold], *, by: AgentSession) -> list[ResourceHold]:
    """Dead holders' holds in a grant's way, released ``expired`` (compare-and-set: a
    holder revived meanwhile keeps its hold)."""
    if not holds:
        return []
    dead = ~live_q("session__") | Q(session__isnull=True)
    ids = list(
        ResourceHold.objects.unreleased()
        .filter(dead, pk__in=[hold.pk for hold in holds])
        .values_list("pk", flat=True)
    )
    taken = [hold for hold in holds if hold.pk in ids]
    by_whom = events.holder(by.pk, by.agent.name if by.agent_id else None)
    end_holds(taken, reason=ReleaseReason.EXPIRED, extra={"by": by_whom})
    return taken


def end_holds(
    holds: list[ResourceHold], *, reason: str, extra: dict[str, Any] | None = None
) -> None:
    if not holds:
        return
    ResourceHold.objects.filter(pk__in=[hold.pk for hold in holds]).update(
        released_at=DbNow(), release_reason=reason
    )
    for hold in holds:
        resource_event(hold, EventType.RESOURCE_RELEASED, {"reason": reason, **(extra or {})})
    if connection.in_atomic_block:
        transaction.on_commit(feed.wakeups.wake)


def resource_event(hold: ResourceHold, type: str, data: dict[str, Any]) -> None:
    """``hold.resource`` is loaded by every caller (it names the resource)."""
    name = hold.resource.name
    events.record(
        hold.workspace_id,
        type,
        issue_id=hold.issue_id,
        session_id=hold.session_id,
        agent_id=hold.agent_id,
        data={"resource": name, "hold": hold.pk, "fence": hold.fence, **data},
    )


def fresh(hold: ResourceHold) -> ResourceHold:
    """The hold as the API shows it: ``is_live`` and its resource's name at hand."""
    return ResourceHold.objects.with_live().select_related("resource", "agent").get(pk=hold.pk)
