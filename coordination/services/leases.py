"""Issue leases: exclusive ownership of an issue, admitted by the project's WIP cap."""

from dataclasses import dataclass

from django.db import connection, transaction

from coordination import selectors
from coordination.errors import (
    InvalidTransition,
    LeaseHeld,
    LeaseNotHeld,
    SessionNotLive,
    WipLimitReached,
)
from coordination.liveness import db_now_sql, live_session_sql
from coordination.models import (
    Agent,
    AgentSession,
    Issue,
    IssueLease,
    Project,
    ReleaseReason,
    WipCapDenial,
    Workspace,
)
from coordination.services.common import release_if_holder_dead, release_unreleased

LEASE = IssueLease._meta.db_table
SESSION = AgentSession._meta.db_table
ISSUE = Issue._meta.db_table
PROJECT = Project._meta.db_table


@dataclass(frozen=True)
class Claimed:
    lease: IssueLease
    created: bool


def lock_project(project_id: int) -> int:
    """Serialise admission per project for the rest of the transaction (invariant 3),
    and return the project's WIP limit as read under that lock.

    Under READ COMMITTED, two claimers would each count ``cap - 1`` live leases and
    both insert, so PostgreSQL takes the project's row lock first. NO KEY UPDATE
    conflicts with itself (claimers queue) but not with the foreign-key checks of
    rows that merely point at the project (new issues, denials). SQLite needs no
    lock: ``BEGIN IMMEDIATE`` already made this transaction the only writer.
    """
    lock = " FOR NO KEY UPDATE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT agent_wip_limit FROM {PROJECT} WHERE id = %s{lock}", [project_id])
        (limit,) = cursor.fetchone()
    return int(limit)


def share_lock_issue(issue_id: int) -> str:
    """The issue's status, read under a share lock on PostgreSQL.

    Closing an issue locks it ``FOR NO KEY UPDATE`` and then releases its lease; the
    share lock orders this claim against such a close, so a lease can never be
    admitted on an issue whose close is committing (it would outlive the close).
    """
    lock = " FOR SHARE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT status FROM {ISSUE} WHERE id = %s{lock}", [issue_id])
        (status,) = cursor.fetchone()
    return str(status)


def insert_lease_within_cap(
    *, workspace_id: int, issue: Issue, session: AgentSession, limit: int
) -> int | None:
    """Insert the lease iff the project's live leases are below ``limit``.

    One statement: the count and the insert cannot be split by another claimer of
    this project (the project lock is held), and the partial unique index turns a
    second unreleased lease on the issue into "no row" instead of an error.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {LEASE} (workspace_id, issue_id, session_id, agent_id,
                                 acquired_at, release_reason)
            SELECT %s, %s, %s, %s, {db_now_sql()}, ''
            WHERE (SELECT count(*) FROM {LEASE} l
                   JOIN {ISSUE} i ON i.id = l.issue_id
                   JOIN {SESSION} s ON s.id = l.session_id
                   WHERE i.project_id = %s AND l.released_at IS NULL
                     AND {live_session_sql("s")}) < %s
            ON CONFLICT (workspace_id, issue_id) WHERE released_at IS NULL DO NOTHING
            RETURNING id
            """,
            [workspace_id, issue.pk, session.pk, session.agent_id, issue.project_id, limit],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def lease_held(lease: IssueLease) -> LeaseHeld:
    return LeaseHeld(
        f"Issue {lease.issue_id} is leased by a live session.",
        holder={"session": lease.session_id, "agent": lease.agent.name if lease.agent else None},
    )


def claim_issue(*, workspace: Workspace, issue_id: int, session_id: int) -> Claimed:
    """Take the issue's lease for a live session (invariants 2, 3, 4, 8).

    A dead holder's lease is reclaimed ``expired`` in this call. A WIP refusal is
    raised only after the transaction commits, so its denial row survives.
    """
    issue = selectors.get_issue(workspace, issue_id)
    session = selectors.get_session(workspace, session_id)
    with transaction.atomic():
        limit = lock_project(issue.project_id)
        status = share_lock_issue(issue.pk)
        if status in Issue.CLOSED_STATUSES:
            raise InvalidTransition(f"Issue {issue.pk} is {status}; reopen it to work on it.")
        if not selectors.is_live(session):
            raise SessionNotLive(f"Session {session.pk} is not live.")
        current = (
            IssueLease.objects.unreleased()
            .with_live()
            .select_related("agent")
            .filter(issue=issue)
            .first()
        )
        if current is not None:
            if current.session_id == session.pk:
                return Claimed(lease=current, created=False)
            if current.is_live or not release_if_holder_dead(current):  # type: ignore[attr-defined]
                raise lease_held(current)
        lease_id = insert_lease_within_cap(
            workspace_id=workspace.pk, issue=issue, session=session, limit=limit
        )
        if lease_id is None:
            raced = IssueLease.objects.unreleased().select_related("agent").filter(issue=issue)
            if (winner := raced.first()) is not None:  # the unique index said no, not the cap
                raise lease_held(winner)
            record_denial(
                workspace=workspace, issue=issue, session=session, agent=session.agent, limit=limit
            )
    if lease_id is None:
        raise WipLimitReached(
            f"Project {issue.project.key} already has {limit} live leases.", limit=limit
        )
    return Claimed(lease=selectors.leases(workspace).get(pk=lease_id), created=True)


def record_denial(
    *, workspace: Workspace, issue: Issue, session: AgentSession | None, agent: Agent, limit: int
) -> WipCapDenial:
    """The append-only record of a claim the WIP cap refused (invariants 3, 8)."""
    return WipCapDenial.objects.create(
        workspace=workspace,
        project_id=issue.project_id,
        issue=issue,
        session=session,
        agent=agent,
        limit=limit,
    )


def release_issue(*, workspace: Workspace, issue_id: int, session_id: int) -> IssueLease:
    """Explicit release by the holding session."""
    issue = selectors.get_issue(workspace, issue_id)
    session = selectors.get_session(workspace, session_id)
    lease = IssueLease.objects.unreleased().filter(issue=issue, session=session).first()
    if lease is None or not release_unreleased(
        IssueLease.objects.filter(pk=lease.pk), ReleaseReason.RELEASED
    ):
        raise LeaseNotHeld(f"Session {session.pk} holds no lease on issue {issue.pk}.")
    return selectors.leases(workspace).get(pk=lease.pk)


def release_session_leases(*, session: AgentSession, reason: str) -> int:
    return release_unreleased(IssueLease.objects.filter(session=session), reason)


def release_issue_leases(*, issue: Issue, reason: str) -> int:
    return release_unreleased(IssueLease.objects.filter(issue=issue), reason)
