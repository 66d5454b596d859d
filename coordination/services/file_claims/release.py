"""Releasing file claims: one path-ordered statement for every kind of release."""

from collections.abc import Sequence
from typing import Any

from coordination.db import sql
from coordination.db.rows import dialect, fetchall
from coordination.db.sql import ADVISORY_LOCK_KEYS
from coordination.models import AgentSession, EventType, Issue, ReleaseReason, Workspace
from coordination.paths import MAX_PATHS, checked_paths
from coordination.selectors import lookups
from coordination.services import events


def release_claims(
    *,
    reason: str,
    workspace_id: int | None = None,
    issue_id: int | None = None,
    session_id: int | None = None,
    paths: list[str] | None = None,
    ids: list[int] | None = None,
    by: dict[str, Any] | None = None,
) -> list[str]:
    """Release, with ``reason``, the unreleased claims that match every filter given;
    return their paths, sorted, and announce one ``claims.released`` per holder
    (``by``: who took them). The rows are locked in path order (the order claimers
    lock them in), so a release and a claim of the same paths queue instead of
    deadlocking (``coordination.services.locking``). Call it inside ``events.change()``.
    """
    statement = sql.release_claims(
        dialect(),
        reason=reason,
        workspace_id=workspace_id,
        issue_id=issue_id,
        session_id=session_id,
        paths=paths,
        ids=ids,
    )
    released = [sql.ReleasedClaim(*row[:5]) for row in fetchall(statement)]
    if released:
        events.claims_released(workspace_of(released, workspace_id), released, reason=reason, by=by)
    return sorted(claim.path for claim in released)


def workspace_of(released: list[sql.ReleasedClaim], workspace_id: int | None) -> int:
    if workspace_id is not None:
        return workspace_id
    return int(Issue.objects.values_list("workspace_id", flat=True).get(pk=released[0].issue_id))


def release_files(
    *,
    workspace: Workspace,
    issue_id: int,
    paths: Sequence[str] | None = None,
    session_id: int | None = None,
) -> list[str]:
    """Release the issue's claims as ``released``: on ``paths`` (all if None), and
    only ``session``'s when given. Paths the issue does not hold are ignored. A path
    releases the claim spelled so, exactly: ``src/api/`` the directory claim, never
    the claims under it (invariant 11 (overlap)), and ``src/api`` a file claim of that name.

    One statement and its event; the issue and session are looked up only when
    nothing was released, to tell "nothing held" from "no such issue or session".
    """
    wanted = checked_paths(paths, limit=MAX_PATHS) if paths is not None else None
    if dialect().postgres and not events.buffering():
        released = released_and_announced(workspace, issue_id, session_id, wanted)
    else:
        with events.change():
            released = release_claims(
                reason=ReleaseReason.RELEASED,
                workspace_id=workspace.pk,
                issue_id=issue_id,
                session_id=session_id,
                paths=wanted,
            )
    if not released:
        lookups.get_issue(workspace, issue_id)
        if session_id is not None:
            lookups.get_session(workspace, session_id)
    return released


def released_and_announced(
    workspace: Workspace, issue_id: int, session_id: int | None, paths: list[str] | None
) -> list[str]:
    """On PostgreSQL, outside any change: the release and its events in one statement,
    atomic by itself, so no transaction around it (three round trips fewer than
    ``events.change()`` with ``release_claims``: its BEGIN, its events and COMMIT)."""
    released = [
        str(row[0])
        for row in fetchall(
            sql.release_claims_announced(
                dialect(),
                reason=ReleaseReason.RELEASED,
                workspace_id=workspace.pk,
                issue_id=issue_id,
                session_id=session_id,
                paths=paths,
                event_type=EventType.CLAIMS_RELEASED,
                lock=ADVISORY_LOCK_KEYS["event_log"],
            )
        )
    ]
    if released:
        events.after_commit([workspace.pk])
    return released


def release_session_claims(*, session: AgentSession, reason: str) -> int:
    return len(
        release_claims(reason=reason, workspace_id=session.workspace_id, session_id=session.pk)
    )


def release_issue_claims(*, issue: Issue, reason: str) -> int:
    return len(release_claims(reason=reason, workspace_id=issue.workspace_id, issue_id=issue.pk))
