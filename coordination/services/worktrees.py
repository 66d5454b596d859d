"""Worktrees, per-run lock modes and run dispatch (invariant 10)."""

from coordination.models import AgentSession, WorktreeLock
from coordination.services.common import release_unreleased


def release_session_locks(*, session: AgentSession, reason: str) -> int:
    return release_unreleased(WorktreeLock.objects.filter(session=session), reason)
