"""Sessions: register, heartbeat, end (DESIGN.md invariant 1)."""

from django.db import connection, transaction

from coordination import selectors
from coordination.errors import SessionEnded
from coordination.liveness import DbNow, db_now_sql, live_session_sql
from coordination.models import Agent, AgentSession, ReleaseReason, Workspace, Worktree
from coordination.services import file_claims, leases, worktrees
from coordination.services.projects import reference_in
from coordination.services.rows import instance

SESSION = AgentSession._meta.db_table


def register_session(
    *,
    workspace: Workspace,
    agent_name: str,
    role: str | None = None,
    department: str | None = None,
    worktree_slug: str | None = None,
) -> AgentSession:
    """Open a new session; an existing agent name is reused (role etc. updated if given)."""
    with reference_in("worktree"):
        worktree = selectors.get_worktree(workspace, worktree_slug) if worktree_slug else None
    with transaction.atomic():
        agent, _ = Agent.objects.get_or_create(workspace=workspace, name=agent_name)
        changed = []
        for field, value in (("role", role), ("department", department), ("worktree", worktree)):
            if value is not None and getattr(agent, field) != value:
                setattr(agent, field, value)
                changed.append(field)
        if changed:
            agent.save(update_fields=changed)
        session = AgentSession.objects.create(workspace=workspace, agent=agent)
    return selectors.sessions(workspace).get(pk=session.pk)


def heartbeat_session(*, workspace: Workspace, session_id: int) -> AgentSession:
    """Refresh liveness with the database clock. A lapsed session is revived;
    whatever was reclaimed from it meanwhile stays lost.

    The fleet's most frequent call, so its two statements are SQL (see
    ``coordination.services.rows``): the update, then the session as the API shows it.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SESSION} SET last_heartbeat_at = {db_now_sql()} "
            "WHERE workspace_id = %s AND id = %s AND status = %s",
            [workspace.pk, session_id, AgentSession.Status.ACTIVE],
        )
        updated = cursor.rowcount
    if not updated:
        selectors.get_session(workspace, session_id, in_url=True)  # 404 if unknown
        raise SessionEnded()
    return session_as_shown(session_id)


SESSION_COLUMNS = [
    "id",
    "workspace_id",
    "agent_id",
    "status",
    "started_at",
    "last_heartbeat_at",
    "ended_at",
]
AGENT_COLUMNS = ["id", "workspace_id", "name", "role", "department", "worktree_id"]
WORKTREE_COLUMNS = ["id", "workspace_id", "slug"]


def session_as_shown(session_id: int) -> AgentSession:
    """The session with ``is_live``, its agent and the agent's worktree: what
    ``selectors.sessions`` gives the serializer, in one statement."""
    columns = (
        [f"s.{name}" for name in SESSION_COLUMNS]
        + [live_session_sql("s")]
        + [f"a.{name}" for name in AGENT_COLUMNS]
        + [f"w.{name}" for name in WORKTREE_COLUMNS]
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT {", ".join(columns)}
            FROM {SESSION} s
            JOIN {Agent._meta.db_table} a ON a.id = s.agent_id
            LEFT JOIN {Worktree._meta.db_table} w ON w.id = a.worktree_id
            WHERE s.id = %s
            """,
            [session_id],
        )
        row = list(cursor.fetchone())
    session_values = row[: len(SESSION_COLUMNS)]
    live = row[len(SESSION_COLUMNS)]
    agent_values = row[len(SESSION_COLUMNS) + 1 : len(SESSION_COLUMNS) + 1 + len(AGENT_COLUMNS)]
    worktree_values = row[len(SESSION_COLUMNS) + 1 + len(AGENT_COLUMNS) :]
    session = instance(AgentSession, SESSION_COLUMNS, session_values)
    session.is_live = bool(live)  # type: ignore[attr-defined]
    agent = instance(Agent, AGENT_COLUMNS, agent_values)
    agent.worktree = (
        instance(Worktree, WORKTREE_COLUMNS, worktree_values) if agent.worktree_id else None
    )
    session.agent = agent
    return session


def end_session(*, workspace: Workspace, session_id: int) -> AgentSession:
    """Clean exit: release everything the session holds as ``agent_ended``.

    Ending twice is harmless; a crash is never recorded this way (invariant 7)."""
    with transaction.atomic():
        session = selectors.get_session(workspace, session_id, in_url=True)
        if session.status == AgentSession.Status.ACTIVE:
            AgentSession.objects.filter(pk=session.pk).update(
                status=AgentSession.Status.ENDED, ended_at=DbNow()
            )
            leases.release_session_leases(session=session, reason=ReleaseReason.AGENT_ENDED)
            file_claims.release_session_claims(session=session, reason=ReleaseReason.AGENT_ENDED)
            worktrees.release_session_locks(session=session, reason=ReleaseReason.AGENT_ENDED)
    return selectors.sessions(workspace).get(pk=session_id)
