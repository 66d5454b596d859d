"""Domain errors. Each carries its API code and status; one handler renders them."""

from typing import Any


class CoordinationError(Exception):
    code = "invalid"
    status = 400
    default_detail = "The request is invalid."

    def __init__(self, detail: str | None = None, **extra: Any) -> None:
        self.detail = detail or self.default_detail
        self.extra = extra
        super().__init__(self.detail)

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "detail": self.detail, **self.extra}


class InvalidInput(CoordinationError):
    code = "invalid"
    status = 400


class Forbidden(CoordinationError):
    code = "forbidden"
    status = 403
    default_detail = "You are not allowed to do that."


class NotFound(CoordinationError):
    code = "not_found"
    status = 404
    default_detail = "Not found."


class Conflict(CoordinationError):
    status = 409


class LeaseHeld(Conflict):
    code = "lease_held"
    default_detail = "Another live session holds this issue."


class WipLimitReached(Conflict):
    code = "wip_limit_reached"
    default_detail = "The project's WIP limit is reached."


class SessionNotLive(Conflict):
    code = "session_not_live"
    default_detail = "The session is not live; send a heartbeat or register again."


class SessionEnded(Conflict):
    code = "session_ended"
    default_detail = "The session has ended; register a new one."


class InvalidTransition(Conflict):
    code = "invalid_transition"
    default_detail = "That status transition is not allowed."


class LeaseNotHeld(Conflict):
    code = "lease_not_held"
    default_detail = "This session holds no unreleased lease on the issue."


class FileConflict(Conflict):
    code = "file_conflict"
    default_detail = "Some paths are claimed by another issue; nothing was claimed."


class WorktreeBusy(Conflict):
    code = "worktree_busy"
    default_detail = "The worktree is locked by another live run."


class RunNotRunning(Conflict):
    code = "run_not_running"
    default_detail = "The run is not running."


class StaleFence(Conflict):
    """A fence that is not the current unreleased lease's (or worktree lock's): its
    holder lost it (reclaimed, overridden, released) and may not act on it."""

    code = "stale_fence"
    default_detail = "That fence is not the current holder's; nothing was changed."


class ResourceBusy(Conflict):
    """Not enough units free for the call, or earlier callers waiting for them (invariant
    20 (resources are counted)); the body names the holders, ``available`` and ``waiting``."""

    code = "resource_busy"
    default_detail = "The resource has not enough free units for this call."


class HoldNotHeld(Conflict):
    code = "hold_not_held"
    default_detail = "This session holds no unreleased units of the resource."


class LandingExists(Conflict):
    code = "landing_exists"
    default_detail = "The issue has an open entry in the landing queue."


class Blocked(Conflict):
    """The issue has an unresolved blocker (invariant 16 (the work graph)): not started, not moved
    to in_progress."""

    code = "blocked"
    default_detail = "The issue has unresolved blockers; finish or cancel them first."


class DependencyCycle(Conflict):
    """A ``blocks`` or ``parent_of`` link that would close a cycle (invariant 16 (the work
    graph))."""

    code = "dependency_cycle"
    default_detail = "That link would close a cycle."


class WorktreeUnresolved(CoordinationError):
    code = "worktree_unresolved"
    status = 422
    default_detail = "No worktree could be resolved for this run."
