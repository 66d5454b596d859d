"""Moving what the services just wrote into the simulated past.

The services stamp every row with the database's clock, as they must (invariant
1 (liveness)). A month of history is therefore simulated one step at a time: a step drives
the services for real, then moves the timestamps it produced back by
``real start - simulated time``. Rows inserted during the step are found by id
(above the step's watermark); later writes to older rows (a release, a heartbeat,
an end) are found by value: they are the only stamps at or after the step's real
start, because everything written before was already moved into the past.

The append-only logs are never moved: inside a step they are written with their
past stamp at once (``logs.recorded_earlier``), by the same offset.

A consequence the simulation relies on: after a step, its sessions' heartbeats
lie in the past, so in the next step they are dead unless they heartbeat again.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import models
from django.db.models import F, Subquery
from django.utils import timezone

from coordination.liveness import DbNow
from coordination.models import (
    Agent,
    AgentSession,
    Event,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    Project,
    Resource,
    ResourceHold,
    Run,
    Workspace,
    Worktree,
    WorktreeLock,
)
from coordination.services import logs

# Leeway between the application's clock (``auto_now``) and the database's: any
# stamp of the step is later than its real start minus this.
SLACK = timedelta(seconds=1)


@dataclass(frozen=True)
class Stamps:
    """A model's timestamp columns: set once at insert, or written again later."""

    model: type[models.Model]
    inserted: tuple[str, ...]
    rewritten: tuple[str, ...] = ()


STAMPS: tuple[Stamps, ...] = (
    Stamps(Worktree, ("created_at",)),
    Stamps(Project, ("created_at",)),
    Stamps(Agent, ("created_at",)),
    Stamps(Issue, ("created_at",), ("updated_at",)),
    Stamps(AgentSession, ("started_at",), ("last_heartbeat_at", "ended_at")),
    Stamps(IssueLease, ("acquired_at",), ("released_at",)),
    Stamps(FileClaim, ("claimed_at",), ("released_at",)),
    Stamps(WorktreeLock, ("acquired_at",), ("released_at",)),
    Stamps(Resource, ("created_at",)),
    Stamps(ResourceHold, ("acquired_at",), ("released_at",)),
    Stamps(Message, ("created_at",)),
    Stamps(Run, ("started_at",), ("finished_at",)),
    Stamps(Event, ("occurred_at",)),
)


def marks_and_now(workspace: Workspace) -> tuple[dict[str, int], datetime]:
    """Each stamped model's highest id, and the database's time, in one query."""
    tops = {
        stamps.model.__name__: Subquery(
            stamps.model._default_manager.order_by("-pk").values("pk")[:1]
        )
        for stamps in STAMPS
    }
    row = (
        Workspace.objects.filter(pk=workspace.pk)
        .annotate(db_now=DbNow(), **tops)
        .values("db_now", *tops)
        .get()
    )
    return {name: row[name] or 0 for name in tops}, row["db_now"]


def offset_between(started: datetime, when: datetime) -> timedelta:
    """``started - when`` in whole milliseconds plus half of one.

    The database stamps in milliseconds; a half-millisecond remainder keeps every
    moved stamp's fraction non-zero, and on SQLite a zero fraction would be
    written without its ``.000000`` (Python's ``str``), a second text format.
    """
    whole = (started - when) // timedelta(milliseconds=1)
    return timedelta(milliseconds=whole, microseconds=500)


class Clock:
    """Runs steps of the simulation at chosen moments of the past."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    @contextmanager
    def at(self, when: datetime) -> Iterator[None]:
        """Drive the services inside the block; afterwards, what they stamped reads
        as if it happened from ``when`` on. A moment not in the past stays as is."""
        marks, started = marks_and_now(self.workspace)
        since = min(started, timezone.now()) - SLACK
        if when >= started:
            yield
            return
        offset = offset_between(started, when)
        with logs.recorded_earlier(offset):
            yield
        for stamps in STAMPS:
            self.shift(stamps, mark=marks[stamps.model.__name__], since=since, offset=offset)

    def shift(self, stamps: Stamps, *, mark: int, since: datetime, offset: timedelta) -> None:
        rows = stamps.model._default_manager.filter(workspace=self.workspace)
        rows.filter(pk__gt=mark).update(**{col: F(col) - offset for col in stamps.inserted})
        for col in stamps.rewritten:
            rows.filter(**{f"{col}__gte": since}).update(**{col: F(col) - offset})
