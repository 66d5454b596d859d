"""The landing queue (invariant 21 (the default branch is always green)).

The server orders, fences and records; the testers (runners) run git and the check.
An entry is queued under the issue's live lease and keeps the issue's claims as that
lease does; it is landable while that lease is the issue's live one (a take rejects it
``stale_fence`` otherwise: its session died and another may be doing the issue again).

A take gives the project's head batch to one tester under a new fence: the first open
entries in order of arrival (id), while their paths overlap none of the earlier ones in
the batch, so they can be applied and checked together. One batch per project is under
test at a time; a batch whose tester is not live is the next take's, whole (invariant
4 (stale reclaim): no sweeper), and its old tester's reports then answer ``stale_fence``.
Every take is made under the project's row lock (PostgreSQL; on SQLite every write
transaction is already alone), so two testers never take one entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError
from django.db.models import Max

from coordination import paths as path_rules
from coordination.errors import (
    InvalidInput,
    LandingExists,
    LeaseNotHeld,
    NotFound,
    SessionNotLive,
    StaleFence,
)
from coordination.liveness import DbNow, live_q
from coordination.models import (
    AgentSession,
    EventType,
    FileClaim,
    IssueLease,
    Landing,
    Project,
    Workspace,
)
from coordination.models.landings import DETAIL_MAX
from coordination.selectors import lookups
from coordination.selectors.sessions import is_live
from coordination.services import events, fences

MAX_BATCH = 32
EVENT_DETAIL = 500  # a rejection event keeps the detail's tail
TESTER_GONE = "tester_gone"  # a dead tester's entry that a take put back in line


@dataclass
class Batch:
    """A take's answer: the batch now ``testing`` under ``fence``; or none, and who
    tests the project's batch now (``busy``), if anyone does."""

    fence: int | None = None
    entries: list[Landing] = field(default_factory=list)
    busy: dict[str, Any] | None = None


# --- queue --------------------------------------------------------------------------------


def queue_landing(
    *,
    workspace: Workspace,
    issue_id: int,
    session_id: int,
    branch: str,
    commit: str,
    fence: int,
) -> Landing:
    """Queue ``commit`` of ``branch`` for the issue, under the session's lease of it."""
    issue = lookups.get_issue(workspace, issue_id)
    session = lookups.get_session(workspace, session_id)
    with events.change():
        if not is_live(session):
            raise SessionNotLive(f"Session {session.pk} is not live.")
        fences.check(fences.LeaseFence(issue.pk), fence, share=True)
        lease = IssueLease.objects.live().filter(issue=issue).first()
        if lease is None or lease.session_id != session.pk:
            raise LeaseNotHeld(f"Session {session.pk} holds no lease on issue {issue.pk}.")
        claimed = sorted(
            set(FileClaim.objects.live().filter(issue=issue).values_list("path", flat=True))
        )
        open_entry = Landing.objects.filter(issue=issue, state__in=Landing.OPEN).first()
        if open_entry is not None and is_superseded(open_entry, fence):
            reject_stale(open_entry, by=session)  # queued under a lease lost since
        elif open_entry is not None:
            raise exists(open_entry)
        try:
            with events.change():  # a savepoint: a racing queue of the issue loses here
                entry = Landing.objects.create(
                    workspace=workspace,
                    project_id=issue.project_id,
                    issue=issue,
                    session=session,
                    agent_id=session.agent_id,
                    branch=branch,
                    commit=commit,
                    lease_fence=fence,
                    paths=claimed,
                )
        except IntegrityError:
            raise exists(
                Landing.objects.filter(issue=issue, state__in=Landing.OPEN).first()
            ) from None
        landing_event(entry, EventType.LANDING_QUEUED, {"branch": branch, "commit": commit})
    return entry


def exists(entry: Landing | None) -> LandingExists:
    if entry is None:  # the racing entry closed meanwhile
        return LandingExists()
    return LandingExists(
        f"Issue {entry.issue_id} has an open landing entry, {entry.pk}: it lands or is "
        "rejected first.",
        landing=entry.pk,
    )


# --- take ---------------------------------------------------------------------------------


def take_batch(
    *, workspace: Workspace, project_key: str, session_id: int, max_entries: int = 4
) -> Batch:
    """The project's head batch for the tester ``session_id``, now ``testing`` under a
    new fence; or none (``busy`` names a live tester of the current batch)."""
    if not 1 <= max_entries <= MAX_BATCH:
        raise InvalidInput(f"max is 1 to {MAX_BATCH}.", field="max")
    project = lookups.get_project(workspace, project_key, field="project")
    session = lookups.get_session(workspace, session_id)
    with events.change():
        locked = Project.objects.select_for_update(no_key=True).get(pk=project.pk)
        if not is_live(session):
            raise SessionNotLive(f"Session {session.pk} is not live.")
        open_entries = list(
            Landing.objects.filter(project=locked, state__in=Landing.OPEN).order_by("pk")
        )
        testing = [entry for entry in open_entries if entry.state == Landing.State.TESTING]
        if testing and testing[0].tester_id is not None:
            live_tester = (
                AgentSession.objects.filter(live_q(), pk=testing[0].tester_id)
                .select_related("agent")
                .first()
            )
            if live_tester is not None:
                agent = live_tester.agent.name if live_tester.agent_id else None
                busy = {"session": live_tester.pk, "agent": agent, "fence": testing[0].fence}
                return Batch(busy=busy)
        candidates = landable(open_entries, by=session)
        batch = head_batch(candidates, max_entries)
        if not batch:
            return Batch()
        newest = Landing.objects.filter(project=locked).aggregate(top=Max("fence"))["top"]
        fence = (newest or 0) + 1
        chosen = [entry.pk for entry in batch]
        left = [
            entry
            for entry in testing  # ``landable`` closed the stale ones among them
            if entry.pk not in chosen and entry.state == Landing.State.TESTING
        ]
        if left:  # a dead tester's entries that this batch does not take: in line again
            Landing.objects.filter(
                pk__in=[entry.pk for entry in left], state=Landing.State.TESTING
            ).update(
                state=Landing.State.QUEUED,
                fence=None,
                tester=None,
                tester_agent=None,
                testing_at=None,
            )
            for entry in left:  # the dead batch's fence; the taker put them back
                data = {"returned_by": entry.fence, "reason": TESTER_GONE}
                landing_event(entry, EventType.LANDING_QUEUED, data, by=session)
        Landing.objects.filter(pk__in=chosen).update(
            state=Landing.State.TESTING,
            fence=fence,
            tester=session,
            tester_agent_id=session.agent_id,
            testing_at=DbNow(),
        )
        entries = list(Landing.objects.filter(pk__in=chosen).order_by("pk"))
        for entry in entries:
            landing_event(
                entry, EventType.LANDING_TESTING, {"fence": fence, "batch": chosen}, by=session
            )
    return Batch(fence=fence, entries=entries)


def landable(entries: list[Landing], *, by: AgentSession) -> list[Landing]:
    """``entries`` whose lease is still the issue's live one; the others are rejected
    ``stale_fence`` here (in the caller's transaction)."""
    if not entries:
        return []
    live_fences = dict(
        IssueLease.objects.live()
        .filter(issue_id__in=[entry.issue_id for entry in entries])
        .values_list("issue_id", "fence")
    )
    kept: list[Landing] = []
    for entry in entries:
        if fences.is_current(entry.lease_fence, live_fences.get(entry.issue_id)):
            kept.append(entry)
            continue
        reject_stale(entry, by=by)
    return kept


def is_superseded(entry: Landing, live_fence: int) -> bool:
    """A queued entry of an earlier lease of its issue: no tester holds it, and the lease
    it was queued under is gone (``live_fence`` is the issue's live one now)."""
    return entry.state == Landing.State.QUEUED and not fences.is_current(
        entry.lease_fence, live_fence
    )


def reject_stale(entry: Landing, *, by: AgentSession) -> None:
    detail = (
        f"The lease {entry.lease_fence} it was queued under is no longer the issue's live "
        "one: its session stopped, and another may be doing the issue again."
    )
    close(entry, Landing.State.REJECTED, reason=Landing.Reason.STALE_FENCE, detail=detail)
    landing_event(
        entry, EventType.LANDING_REJECTED, {"reason": entry.reason, "detail": detail}, by=by
    )


def head_batch(entries: list[Landing], max_entries: int) -> list[Landing]:
    """The first entries, in order, while each one's paths overlap none of the earlier
    ones' (invariant 11 (overlap)); an entry without paths is a batch of its own."""
    batch: list[Landing] = []
    taken: list[str] = []
    for entry in entries:
        if len(batch) == max_entries:
            break
        if batch and (not entry.paths or not taken):
            break
        if batch and path_rules.overlapping_pairs(entry.paths, taken):
            break
        batch.append(entry)
        taken += entry.paths
    return batch


# --- the tester's reports ---------------------------------------------------------------


def land(
    *, workspace: Workspace, landing_id: int, session_id: int, fence: int, commit: str
) -> Landing:
    """The tester moved the default branch to a checked tree holding the entry's work,
    ``commit``."""
    get_landing(workspace, landing_id)
    session = lookups.get_session(workspace, session_id)
    with events.change():
        entry = tested_entry(workspace, landing_id, session, fence)
        close(entry, Landing.State.LANDED, landed_commit=commit)
        landing_event(entry, EventType.LANDING_LANDED, {"commit": commit}, by=session)
    return entry


def reject(
    *,
    workspace: Workspace,
    landing_id: int,
    session_id: int,
    fence: int,
    reason: str,
    detail: str = "",
) -> Landing:
    """The entry does not apply (``conflict``) or its tree fails the check
    (``check_failed``): it goes back to its agent."""
    if reason not in (Landing.Reason.CONFLICT, Landing.Reason.CHECK_FAILED):
        raise InvalidInput("reason is conflict or check_failed.", field="reason")
    get_landing(workspace, landing_id)
    session = lookups.get_session(workspace, session_id)
    detail = detail[-DETAIL_MAX:]
    with events.change():
        entry = tested_entry(workspace, landing_id, session, fence)
        close(entry, Landing.State.REJECTED, reason=reason, detail=detail)
        data = {"reason": reason, "detail": detail[-EVENT_DETAIL:]}
        landing_event(entry, EventType.LANDING_REJECTED, data, by=session)
    return entry


def return_batch(*, workspace: Workspace, session_id: int, fence: int) -> list[int]:
    """The batch's entries still ``testing``, queued again at their place (ids keep the
    order of arrival)."""
    session = lookups.get_session(workspace, session_id)
    with events.change():
        entries = list(
            Landing.objects.select_for_update(no_key=True)
            .filter(
                workspace=workspace,
                tester=session,
                fence=fence,
                state=Landing.State.TESTING,
            )
            .order_by("pk")
        )
        if not entries:
            raise fences.stale(
                f"Session {session.pk} tests no batch under fence {fence}: another tester took "
                "it, or it was reported whole; nothing was changed.",
                fence=fence,
                current=None,
            )
        Landing.objects.filter(pk__in=[entry.pk for entry in entries]).update(
            state=Landing.State.QUEUED, fence=None, tester=None, tester_agent=None, testing_at=None
        )
        for entry in entries:
            landing_event(entry, EventType.LANDING_QUEUED, {"returned_by": fence}, by=session)
    return [entry.pk for entry in entries]


def get_landing(workspace: Workspace, landing_id: int) -> Landing:
    entry = Landing.objects.filter(workspace=workspace, pk=landing_id).first()
    if entry is None:
        raise NotFound(f"Landing {landing_id} does not exist.")
    return entry


def tested_entry(
    workspace: Workspace, landing_id: int, session: AgentSession, fence: int
) -> Landing:
    """The entry, locked, while ``session`` tests it under ``fence``; else ``stale_fence``."""
    entry = (
        Landing.objects.select_for_update(no_key=True)
        .filter(workspace=workspace, pk=landing_id)
        .first()
    )
    if entry is None:
        raise NotFound(f"Landing {landing_id} does not exist.")
    fences.check(BatchFence(entry, session.pk), fence)
    return entry


@dataclass(frozen=True)
class BatchFence:
    """The fence of the batch that holds ``entry`` (read locked by the caller), as
    ``session`` tests it: a fence the tester must pass to report the entry (``fences.check``)."""

    entry: Landing
    session_id: int

    def current(self, *, share: bool = False) -> int | None:
        entry = self.entry
        if entry.state != Landing.State.TESTING or entry.tester_id != self.session_id:
            return None  # closed, queued again, or another tester's batch now
        return entry.fence

    def stale(self, fence: int) -> StaleFence:
        entry = self.entry
        if entry.state == Landing.State.TESTING:
            now = f"it is under test by session {entry.tester_id} with fence {entry.fence}"
            current = entry.fence
        else:
            now, current = f"it is {entry.state}", None
        return fences.stale(
            f"Fence {fence} is not the batch of landing {entry.pk} that this session tests "
            f"({now}); nothing was changed.",
            fence=fence,
            current=current,
        )


def close(entry: Landing, state: str, **changes: Any) -> None:
    Landing.objects.filter(pk=entry.pk).update(state=state, finished_at=DbNow(), **changes)
    entry.refresh_from_db()


def landing_event(
    entry: Landing, type: str, data: dict[str, Any], *, by: AgentSession | None = None
) -> None:
    """On the entry's issue and project; the actor is the tester (``by``) or the session
    that queued it."""
    session_id, agent_id = (by.pk, by.agent_id) if by else (entry.session_id, entry.agent_id)
    events.record(
        entry.workspace_id,
        type,
        project_id=entry.project_id,
        issue_id=entry.issue_id,
        session_id=session_id,
        agent_id=agent_id,
        data={"landing": entry.pk, **data},
    )
