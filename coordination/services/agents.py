"""Sessions: register, heartbeat, end (DESIGN.md invariant 1)."""

from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from coordination import selectors
from coordination.errors import SessionEnded
from coordination.liveness import DbNow, db_now_sql, live_session_sql
from coordination.models import Agent, AgentSession, ReleaseReason, Workspace, Worktree
from coordination.services import file_claims, leases, worktrees
from coordination.services.projects import reference_in
from coordination.services.rows import instance

SESSION = AgentSession._meta.db_table
AGENT = Agent._meta.db_table
WORKTREE = Worktree._meta.db_table


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

    The fleet's most frequent call, so it is SQL (see ``coordination.services.rows``):
    on PostgreSQL one UPDATE returns the session as the API shows it; SQLite cannot
    return another table's columns from an UPDATE, so it reads them after.
    """
    beat = f"UPDATE {SESSION} SET last_heartbeat_at = {db_now_sql()}"
    match = f"{SESSION}.workspace_id = %s AND {SESSION}.id = %s AND {SESSION}.status = %s"
    params: list[Any] = [workspace.pk, session_id, AgentSession.Status.ACTIVE]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"{beat} FROM {AGENT} a LEFT JOIN {WORKTREE} w ON w.id = a.worktree_id "
                f"WHERE a.id = {SESSION}.agent_id AND {match} RETURNING {shown_columns()}",
                params,
            )
            row = cursor.fetchone()
        else:
            cursor.execute(f"{beat} WHERE {match}", params)
            row = session_row(cursor, session_id) if cursor.rowcount else None
    if row is None:
        selectors.get_session(workspace, session_id, in_url=True)  # 404 if unknown
        raise SessionEnded()
    return shown_session(row)


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


def shown_columns() -> str:
    """The session (as ``{SESSION}``), whether it is live, its agent (``a``) and the
    agent's worktree (``w``): what the API shows of a session."""
    return ", ".join(
        [f"{SESSION}.{name}" for name in SESSION_COLUMNS]
        + [live_session_sql(SESSION)]
        + [f"a.{name}" for name in AGENT_COLUMNS]
        + [f"w.{name}" for name in WORKTREE_COLUMNS]
    )


def session_row(cursor: Any, session_id: int) -> tuple[Any, ...] | None:
    cursor.execute(
        f"SELECT {shown_columns()} FROM {SESSION} "
        f"JOIN {AGENT} a ON a.id = {SESSION}.agent_id "
        f"LEFT JOIN {WORKTREE} w ON w.id = a.worktree_id WHERE {SESSION}.id = %s",
        [session_id],
    )
    row: tuple[Any, ...] | None = cursor.fetchone()
    return row


def shown_session(row: Sequence[Any]) -> AgentSession:
    """A row of ``shown_columns()`` as the instances ``selectors.sessions`` gives."""
    agent_at = len(SESSION_COLUMNS) + 1
    worktree_at = agent_at + len(AGENT_COLUMNS)
    session = instance(AgentSession, SESSION_COLUMNS, row[: agent_at - 1])
    session.is_live = bool(row[agent_at - 1])  # type: ignore[attr-defined]
    agent = instance(Agent, AGENT_COLUMNS, row[agent_at:worktree_at])
    agent.worktree = (
        instance(Worktree, WORKTREE_COLUMNS, row[worktree_at:]) if agent.worktree_id else None
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
