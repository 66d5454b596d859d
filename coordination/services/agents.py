"""Sessions: register, heartbeat, end (docs/design.md invariant 1 (liveness))."""

from coordination.db import sql
from coordination.db.rows import dialect, execute, fetchone
from coordination.errors import SessionEnded
from coordination.liveness import DbNow
from coordination.models import (
    Agent,
    AgentSession,
    ApiKey,
    EventType,
    ReleaseReason,
    Workspace,
)
from coordination.selectors import lookups
from coordination.selectors.sessions import sessions, shown_session
from coordination.services import access, events, file_claims, leases, resources, runs
from coordination.services.projects import reference_in


def register_session(
    *,
    workspace: Workspace,
    agent_name: str,
    role: str | None = None,
    department: str | None = None,
    worktree_slug: str | None = None,
    api_key: ApiKey | None = None,
) -> AgentSession:
    """Open a new session; an existing agent name is reused (role etc. updated if given).
    The session records ``api_key``, the key that opened it (invariant 13 (the key is the
    actor))."""
    with reference_in("worktree"):
        worktree = lookups.get_worktree(workspace, worktree_slug) if worktree_slug else None
    with events.change():
        agent, _ = Agent.objects.get_or_create(workspace=workspace, name=agent_name)
        changed = []
        for field, value in (("role", role), ("department", department), ("worktree", worktree)):
            if value is not None and getattr(agent, field) != value:
                setattr(agent, field, value)
                changed.append(field)
        if changed:
            agent.save(update_fields=changed)
        session = AgentSession.objects.create(workspace=workspace, agent=agent, api_key=api_key)
        events.session_event(session, EventType.SESSION_REGISTERED)
    return sessions(workspace).get(pk=session.pk)


def heartbeat_session(
    *, workspace: Workspace, session_id: int, agent_id: int | None = None
) -> AgentSession:
    """Refresh liveness with the database clock. A lapsed session is revived;
    whatever was reclaimed from it meanwhile stays lost.

    The fleet's most frequent call, so it is SQL (``sql.heartbeat``): on PostgreSQL
    one UPDATE returns the session as the API shows it; on SQLite a read follows.
    ``agent_id`` is ``access.session_owner`` of an agent key (invariant 13 (the key is the actor)):
    the UPDATE matches that agent's session only, and another agent's is refused unchanged.
    """
    d = dialect()
    beat = sql.heartbeat(d, workspace_id=workspace.pk, session_id=session_id, agent_id=agent_id)
    if d.postgres:
        row = fetchone(beat)
    else:
        row = fetchone(sql.shown_session(d, session_id=session_id)) if execute(beat) else None
    if row is None:
        session = lookups.get_session(workspace, session_id, in_url=True)  # 404 if unknown
        if agent_id is not None and session.agent_id != agent_id:
            raise access.not_own_session(session_id)
        raise SessionEnded()
    return shown_session(row)


def report_progress(*, workspace: Workspace, session_id: int, note: str = "") -> AgentSession:
    """Invariant 17 (stalled is derived): the session's work moved (``last_progress_at`` by the
    database's clock, and its note). Liveness is untouched: progress never revives a session.
    An ended session is 409 ``session_ended``, an unknown one 404."""
    statement = sql.progress(dialect(), workspace_id=workspace.pk, session_id=session_id, note=note)
    with events.change():
        if not execute(statement):
            lookups.get_session(workspace, session_id, in_url=True)  # 404 if unknown
            raise SessionEnded()
    return sessions(workspace).get(pk=session_id)


def end_session(*, workspace: Workspace, session_id: int, handed_in: bool = False) -> AgentSession:
    """Clean exit: release everything the session holds as ``agent_ended``.

    ``handed_in``: the end closes the session's own change (finish_work's transition
    and report), which is progress (invariant 17 (stalled is derived)). The event log's trigger
    stamps only active sessions and the events are written at the commit, after this, so the
    stamp is set here, in the same UPDATE.

    Ending twice is harmless; a crash is never recorded this way (invariant 7 (release reasons))."""
    stamped = {"last_progress_at": DbNow()} if handed_in else {}
    with events.change():
        session = lookups.get_session(workspace, session_id, in_url=True)
        # Compare-and-set: of two ends of one session, one ends it and announces it.
        if AgentSession.objects.filter(pk=session.pk, status=AgentSession.Status.ACTIVE).update(
            status=AgentSession.Status.ENDED, ended_at=DbNow(), **stamped
        ):
            leases.release_session_leases(session=session, reason=ReleaseReason.AGENT_ENDED)
            file_claims.release_session_claims(session=session, reason=ReleaseReason.AGENT_ENDED)
            runs.end_session_runs(session=session, reason=ReleaseReason.AGENT_ENDED)
            resources.release_session_holds(session=session, reason=ReleaseReason.AGENT_ENDED)
            events.session_event(session, EventType.SESSION_ENDED)
    return sessions(workspace).get(pk=session_id)
