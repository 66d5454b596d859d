"""Agents' sessions: the list [list_active_agents], as a service returns one, and
whether one is live."""

from collections.abc import Mapping, Sequence
from typing import Any

from coordination.db import sql
from coordination.db.rows import Listing, dialect, fetchone, take
from coordination.filtersets import SessionFilter
from coordination.models import Agent, AgentSession, AgentSessionQuerySet, Workspace, Worktree
from coordination.selectors.filtering import checked


def sessions(workspace: Workspace) -> AgentSessionQuerySet:
    return (
        AgentSession.objects.filter(workspace=workspace)
        .with_live()
        .select_related("agent", "agent__worktree")
        .order_by("-id")
    )


def session_list(
    *, workspace: Workspace, filters: Mapping[str, Any] | None = None
) -> Listing[AgentSession]:
    """GET /sessions/ [list_active_agents]: ``sessions()`` filtered (``SessionFilter``
    reads and checks the query), newest first, as SQL (``sql.session_page``): any agent
    of a fleet may ask who else is live. The count and a page of the 1,000 live among
    100,000 sessions, loaded: 14.7 ms as querysets, 10.5 ms so on PostgreSQL; 15.3 and
    6.6 ms on SQLite."""
    chosen = checked(SessionFilter(filters or {}))
    listed = sql.SessionList(
        workspace_id=workspace.pk,
        live=chosen.get("live"),
        stalled=chosen.get("stalled"),
        agent=chosen.get("agent") or None,
        role=chosen.get("role") or None,
    )
    d = dialect()
    return Listing(
        counted=sql.session_count(d, listed),
        page=lambda limit, offset: sql.session_page(d, listed, limit=limit, offset=offset),
        load=shown_session,
    )


def shown_session(row: Sequence[Any]) -> AgentSession:
    """A row of ``sql.shown_session_columns`` as the instances ``sessions()`` gives:
    the session with ``is_live`` and ``is_stalled``, its agent and the agent's worktree."""
    session, at = take(AgentSession, row, 0)
    assert session is not None
    session.is_live = bool(row[at])  # type: ignore[attr-defined]
    session.is_stalled = bool(row[at + 1])  # type: ignore[attr-defined]
    agent, at = take(Agent, row, at + 2)
    assert agent is not None
    agent.worktree, _ = take(Worktree, row, at)
    session.agent = agent
    return session


def live_sessions(workspace: Workspace) -> AgentSessionQuerySet:
    return sessions(workspace).live()


def is_live(session: AgentSession) -> bool:
    """Judged by the database, with the same predicate as every other check (as
    SQL: it is asked on every claim, and a queryset costs more than its round trip)."""
    return fetchone(sql.session_is_live(dialect(), session_id=session.pk)) is not None
