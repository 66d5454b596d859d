"""File claims: path-level reservations against an issue (invariants 4-8).

Issue leases stop two agents from taking one ticket; file claims stop two agents on
different tickets from editing one file. The tiers are independent: a claim names an
issue, but its claimer need not hold that issue's lease.

How a claim stays all-or-nothing under concurrency
---------------------------------------------------
The guard is the partial unique index ``one_unreleased_claim_per_path``: a path can
never have two unreleased rows. Around it, ``claim_files`` runs one transaction per
attempt that

1. (PostgreSQL) takes a transaction-scoped advisory lock per requested path, in
   one global order, so two claimers of overlapping sets queue path by path instead
   of interleaving; then a ``FOR SHARE`` lock on the claiming and the holding
   issues, so that closing one of those issues (which locks the issue, then its
   claims) and this claim are ordered: no claim is admitted on an issue whose close
   is committing, and neither waits on the other in a cycle;
2. locks the unreleased rows of the requested paths ``FOR UPDATE`` in path order
   (releases lock rows in path order too), so what it classifies stays true until
   it commits;
3. decides: refuse (write the conflict log, commit, then raise), or reclaim dead
   holders, override (``force``) and insert the rest with ``ON CONFLICT DO
   NOTHING``. An insert that returns no row means someone the locks do not cover
   got there first: the whole attempt is rolled back and retried, a bounded number
   of times, and then reported as a conflict — never a partial claim, never an
   ``IntegrityError``.

SQLite opens every transaction with ``BEGIN IMMEDIATE``: writers are serialised
already, so step 1 and the row locks are PostgreSQL-only.
"""

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, QuerySet, When

from coordination import selectors
from coordination.errors import (
    FileConflict,
    InvalidInput,
    InvalidTransition,
    NotFound,
    SessionNotLive,
)
from coordination.liveness import db_now_sql, live_q, live_session_sql
from coordination.models import (
    Agent,
    AgentSession,
    ClaimConflict,
    FileClaim,
    Issue,
    ReleaseReason,
    Workspace,
)
from coordination.paths import normalise_paths
from coordination.services import leases, messages
from coordination.services.common import release_if_holder_dead, release_unreleased
from coordination.services.rows import instance, placeholders

CLAIM = FileClaim._meta.db_table
ISSUE = Issue._meta.db_table
SESSION = AgentSession._meta.db_table
AGENT = Agent._meta.db_table
# A claim's columns, as the hot-path statements read them (coordination.services.rows).
CLAIM_COLUMNS = [
    "id",
    "workspace_id",
    "issue_id",
    "session_id",
    "agent_id",
    "path",
    "claimed_at",
    "released_at",
    "release_reason",
]
MAX_PATHS = 100
MAX_ATTEMPTS = 4
# First half of the two-part advisory key: keeps file-claim locks apart from any
# other advisory lock the database may serve.
ADVISORY_CLASS = 0x50464C  # "PFL"


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a path: its issue, session and agent name."""

    path: str
    issue: int
    session: int | None
    agent: str | None

    @classmethod
    def of(cls, claim: FileClaim) -> "Holder":
        agent = claim.agent.name if claim.agent is not None else None
        return cls(path=claim.path, issue=claim.issue_id, session=claim.session_id, agent=agent)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ClaimedFiles:
    claims: list[FileClaim]
    reclaimed: list[str]
    overridden: list[Holder]


@dataclass(frozen=True)
class _Refused:
    conflicts: list[Holder]


class _Raced(Exception):
    """Another transaction changed a requested path under this attempt; roll it back."""


# --- checks -----------------------------------------------------------------------


def checked_paths(paths: Sequence[str]) -> list[str]:
    """1-100 entries, each normalised; sorted and without duplicates (invariant 6)."""
    if isinstance(paths, str):  # a str is a Sequence[str] too: one path, not its letters
        raise InvalidInput("Give the paths as a list of strings.", field="paths")
    if not 1 <= len(paths) <= MAX_PATHS:
        raise InvalidInput(
            f"Give 1 to {MAX_PATHS} paths, not {len(paths)}.", field="paths", count=len(paths)
        )
    return normalise_paths(paths)


def path_lock_key(workspace_id: int, path: str) -> int:
    """A stable signed 32-bit key per (workspace, path); a collision only serialises
    two unrelated paths, it never lets two claimers of one path through."""
    digest = hashlib.blake2b(f"{workspace_id}/{path}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


# --- locking --------------------------------------------------------------------------


def lock_paths_and_issues(*, workspace_id: int, issue_id: int, paths: list[str]) -> str:
    """Invariant 5 under READ COMMITTED: serialise claimers per path, deadlock-free.
    Returns the claiming issue's status, read under the lock.

    Advisory locks are taken in ascending key order, so claimers of overlapping sets
    never wait on each other in a cycle; an insert can then only meet a row the
    claimer already saw. The claiming and holding issues are locked ``FOR SHARE``:
    compatible with other claimers, but it waits for (or holds off) a transition,
    which locks the issue ``FOR NO KEY UPDATE`` before releasing its claims, so a
    claim can never be admitted on an issue whose close is committing. SQLite needs
    neither: ``BEGIN IMMEDIATE`` made this the only writer.

    The issues are found by primary key (``= ANY(ARRAY(...))``): written as ``id = %s
    OR id IN (...)`` the lookup scanned the whole issue table on every claim.
    """
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            cursor.execute(f"SELECT id, status FROM {ISSUE} WHERE id = %s", [issue_id])
            return issue_status(cursor.fetchall(), issue_id)
        keys = sorted({path_lock_key(workspace_id, path) for path in paths})
        cursor.execute(
            """
            SELECT pg_advisory_xact_lock(%s, key)
            FROM unnest(%s::int[]) WITH ORDINALITY AS requested(key, position)
            ORDER BY position
            """,
            [ADVISORY_CLASS, keys],
        )
        cursor.execute(
            f"""
            SELECT id, status FROM {ISSUE}
            WHERE id = ANY(ARRAY(SELECT %s UNION ALL
                                 SELECT issue_id FROM {CLAIM}
                                 WHERE workspace_id = %s AND released_at IS NULL
                                   AND path = ANY(%s)))
            ORDER BY id
            FOR SHARE
            """,
            [issue_id, workspace_id, paths],
        )
        return issue_status(cursor.fetchall(), issue_id)


def issue_status(rows: list[tuple[int, str]], issue_id: int) -> str:
    """The issue's status among ``(id, status)`` rows; 404 if it was deleted since."""
    status = dict(rows).get(issue_id)
    if status is None:
        raise NotFound(f"Issue {issue_id} does not exist.")
    return str(status)


def locked_holders(*, workspace: Workspace, paths: list[str]) -> list[FileClaim]:
    """The unreleased claims on ``paths``, row-locked in path order, each with its
    agent and ``holder_live`` (is its session live)."""
    lock = "FOR UPDATE OF c" if connection.vendor == "postgresql" else ""
    columns = ", ".join(f"c.{name}" for name in CLAIM_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT {columns}, a.name, {live_session_sql("s")}
            FROM {CLAIM} c
            LEFT JOIN {SESSION} s ON s.id = c.session_id
            LEFT JOIN {AGENT} a ON a.id = c.agent_id
            WHERE c.workspace_id = %s AND c.released_at IS NULL
              AND c.path IN ({placeholders(paths)})
            ORDER BY c.path
            {lock}
            """,
            [workspace.pk, *paths],
        )
        rows = cursor.fetchall()
    holders = []
    for *values, agent_name, holder_live in rows:
        claim = instance(FileClaim, CLAIM_COLUMNS, values)
        agent_id = claim.agent_id
        claim.agent = (
            instance(Agent, ["id", "name"], [agent_id, agent_name]) if agent_id else None
        )
        claim.holder_live = bool(holder_live)  # type: ignore[attr-defined]
        holders.append(claim)
    return holders


def insert_claims(
    *, workspace_id: int, issue_id: int, session: AgentSession | None, paths: list[str]
) -> list[FileClaim]:
    """Insert one unreleased claim per path, in path order; return the new claims.

    Invariant 5: the partial unique index on (workspace_id, path) WHERE released_at
    IS NULL is the last word. ON CONFLICT turns a path someone else holds into "no
    row" instead of an IntegrityError that would abort the PostgreSQL transaction;
    the caller treats any missing row as a lost race and rolls everything back.
    """
    if not paths:
        return []
    session_id = session.pk if session is not None else None
    agent_id = session.agent_id if session is not None else None
    rows = ", ".join([f"(%s, %s, %s, %s, %s, {db_now_sql()}, '')"] * len(paths))
    params: list[Any] = []
    for path in paths:
        params += [workspace_id, issue_id, session_id, agent_id, path]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {CLAIM} (workspace_id, issue_id, session_id, agent_id, path,
                                 claimed_at, release_reason)
            VALUES {rows}
            ON CONFLICT (workspace_id, path) WHERE released_at IS NULL DO NOTHING
            RETURNING {", ".join(CLAIM_COLUMNS)}
            """,
            params,
        )
        claims = [instance(FileClaim, CLAIM_COLUMNS, row) for row in cursor.fetchall()]
    for claim in claims:
        claim.agent = session.agent if session is not None else None
    return sorted(claims, key=lambda claim: claim.path)


# --- claim ----------------------------------------------------------------------------


def existing_issue(workspace: Workspace, issue_id: int) -> Issue:
    """The issue (its id, workspace and status as read now), or 404."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, workspace_id, status FROM {ISSUE} WHERE id = %s AND workspace_id = %s",
            [issue_id, workspace.pk],
        )
        row = cursor.fetchone()
    if row is None:
        raise NotFound(f"Issue {issue_id} does not exist.")
    return instance(Issue, ["id", "workspace_id", "status"], row)


def claimer_session(workspace: Workspace, session_id: int) -> AgentSession:
    """The claiming session with its agent, if it is live: else 400 (it is named in
    the body) or 409 ``session_not_live``. One statement, inside the claim's
    transaction, so liveness is judged when the claim is made."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT s.id, s.workspace_id, s.agent_id, s.status, a.name, {live_session_sql("s")}
            FROM {SESSION} s JOIN {AGENT} a ON a.id = s.agent_id
            WHERE s.id = %s AND s.workspace_id = %s
            """,
            [session_id, workspace.pk],
        )
        row = cursor.fetchone()
    if row is None:
        raise InvalidInput(f"Session {session_id} does not exist.")
    *values, agent_name, live = row
    if not live:
        raise SessionNotLive(f"Session {session_id} is not live.")
    session = instance(AgentSession, ["id", "workspace_id", "agent_id", "status"], values)
    session.agent = instance(Agent, ["id", "name"], [session.agent_id, agent_name])
    return session


def claim_files(
    *,
    workspace: Workspace,
    issue_id: int,
    paths: Sequence[str],
    session_id: int | None = None,
    force: bool = False,
    fence: int | None = None,
) -> ClaimedFiles:
    """Claim every path for the issue, or none (invariants 4, 5, 6, 8).

    With ``fence`` (the fence of the issue's lease, API.md "Fences"), the claim is
    made only while that lease is the issue's unreleased one: otherwise
    ``stale_fence``, and nothing is claimed or logged.

    - a path this issue already holds is kept (idempotent) and returned in claims;
    - a path whose holder session is not live is reclaimed ``expired``, no conflict;
    - a path held by another issue's live or session-less claim is a conflict: without
      ``force`` the request is refused (409 naming every holder) after its conflict
      rows commit; with ``force`` the holders are released ``overridden`` and a
      message to ``issue:<this issue>`` names the displaced issues.
    """
    issue = existing_issue(workspace, issue_id)
    wanted = checked_paths(paths)
    for _ in range(MAX_ATTEMPTS):
        try:
            outcome = _attempt(
                workspace=workspace,
                issue=issue,
                session_id=session_id,
                paths=wanted,
                force=force,
                fence=fence,
            )
        except _Raced:
            continue
        except leases.IssueLocked:  # see leases.check_lease_fence
            leases.wait_for_issue(issue.pk)
            continue
        if isinstance(outcome, _Refused):
            raise file_conflict(outcome.conflicts, requested=len(wanted))
        return outcome
    # Each retry follows a path that changed hands under us; after a few, the caller
    # gets the holders as they stand rather than an unbounded wait.
    current = (
        FileClaim.objects.filter(workspace=workspace, path__in=wanted, released_at__isnull=True)
        .exclude(issue=issue)
        .select_related("agent")
        .order_by("path")
    )
    raise file_conflict(
        [Holder.of(claim) for claim in current],
        requested=len(wanted),
        detail="The paths changed hands while they were claimed; nothing was claimed. Retry.",
    )


def file_conflict(
    conflicts: list[Holder], *, requested: int, detail: str | None = None
) -> FileConflict:
    return FileConflict(
        detail
        or f"{len(conflicts)} of {requested} paths are claimed by other issues; "
        "nothing was claimed.",
        conflicts=[holder.as_dict() for holder in conflicts],
    )


def _attempt(
    *,
    workspace: Workspace,
    issue: Issue,
    session_id: int | None,
    paths: list[str],
    force: bool,
    fence: int | None = None,
) -> ClaimedFiles | _Refused:
    with transaction.atomic():
        if fence is not None:
            # First, before the path locks: the lease and its issue are share-locked
            # (PostgreSQL) until commit, so the lease cannot be reclaimed under this
            # claim, and a refusal has written nothing. Lease before paths is the
            # order a reclaiming start_work takes them in.
            leases.check_lease_fence(issue_id=issue.pk, fence=fence)
        session = claimer_session(workspace, session_id) if session_id is not None else None
        # Read under the issue lock: closing releases the issue's claims, so a claim
        # admitted after it would outlive the close and block others until forced.
        status = lock_paths_and_issues(workspace_id=workspace.pk, issue_id=issue.pk, paths=paths)
        if status in Issue.CLOSED_STATUSES:
            raise InvalidTransition(f"Issue {issue.pk} is {status}; reopen it to claim files.")
        kept: list[FileClaim] = []
        dead: list[FileClaim] = []
        contested: list[FileClaim] = []
        for claim in locked_holders(workspace=workspace, paths=paths):
            if claim.session_id is not None and not claim.holder_live:  # type: ignore[attr-defined]
                dead.append(claim)
            elif claim.issue_id == issue.pk:
                kept.append(claim)
            else:
                contested.append(claim)  # live, or session-less: held until forced
        log_conflicts(
            workspace=workspace, issue=issue, session=session, holders=contested, forced=force
        )
        holders = [Holder.of(claim) for claim in contested]
        if contested and not force:
            # Commit the conflict log only: dead holders are left for the next
            # successful claim, so a refusal changes nothing else (invariant 6).
            return _Refused(conflicts=holders)
        for claim in dead:
            if not release_if_holder_dead(claim, sessionless_is_dead=False):
                raise _Raced  # revived by a heartbeat since we looked
        if contested:
            overridden = release_unreleased(
                FileClaim.objects.filter(pk__in=[claim.pk for claim in contested]),
                ReleaseReason.OVERRIDDEN,
            )
            if overridden != len(contested):
                raise _Raced
            announce_override(workspace=workspace, issue=issue, session=session, holders=holders)
        kept_paths = {claim.path for claim in kept}
        fresh = [path for path in paths if path not in kept_paths]
        inserted = insert_claims(
            workspace_id=workspace.pk, issue_id=issue.pk, session=session, paths=fresh
        )
        if len(inserted) != len(fresh):
            raise _Raced  # a path was taken after our locks: roll back the whole attempt
        return ClaimedFiles(
            claims=sorted(kept + inserted, key=lambda claim: claim.path),
            reclaimed=[claim.path for claim in dead],
            overridden=holders,
        )


def log_conflicts(
    *,
    workspace: Workspace,
    issue: Issue,
    session: AgentSession | None,
    holders: list[FileClaim],
    forced: bool,
    agent: Agent | None = None,
) -> None:
    """One append-only ``claim_conflicts`` row per contested path (invariant 8).
    The rejected agent is the session's, or ``agent`` for a claimer without one.

    One INSERT, in the refused claim's transaction: it holds the path locks until it
    commits, so the shorter it is, the sooner the next claimer of those paths goes."""
    if not holders:
        return
    rejected_session_id = session.pk if session is not None else None
    rejected_agent_id = session.agent_id if session is not None else (agent.pk if agent else None)
    rows = ", ".join([f"(%s, %s, %s, %s, %s, %s, %s, %s, %s, {db_now_sql()})"] * len(holders))
    params: list[Any] = []
    for claim in holders:
        params += [
            workspace.pk,
            claim.path,
            issue.pk,
            rejected_session_id,
            rejected_agent_id,
            claim.issue_id,
            claim.session_id,
            claim.agent_id,
            forced,
        ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {ClaimConflict._meta.db_table}
                (workspace_id, path, rejected_issue_id, rejected_session_id,
                 rejected_agent_id, holding_issue_id, holding_session_id, holding_agent_id,
                 forced, occurred_at)
            VALUES {rows}
            """,
            params,
        )


def announce_override(
    *, workspace: Workspace, issue: Issue, session: AgentSession | None, holders: list[Holder]
) -> None:
    """Tell everyone concerned at once, not at their next failed write: the claiming
    issue (whose files it took), each displaced issue and each displaced agent (which
    of its paths were taken, by which issue and agent)."""
    taker = session.agent.name if session is not None else None
    by = f"issue {issue.pk}" + (f" ({taker})" if taker else "")
    lost: dict[int, list[str]] = {}
    for holder in holders:
        lost.setdefault(holder.issue, []).append(holder.path)
    parts = [
        f"issue {displaced} ({len(taken)} path{'s' if len(taken) > 1 else ''}: {', '.join(taken)})"
        for displaced, taken in sorted(lost.items())
    ]
    posts = {
        messages.issue_scope(issue.pk): f"Issue {issue.pk} took file claims by force from "
        + "; ".join(parts)
        + "."
    }
    for displaced, taken in sorted(lost.items()):
        posts[messages.issue_scope(displaced)] = (
            f"{by} took by force the file claims of issue {displaced} on: {', '.join(taken)}."
        )
    by_agent: dict[str, list[str]] = {}
    for holder in holders:
        if holder.agent is not None:
            by_agent.setdefault(holder.agent, []).append(f"{holder.path} (issue {holder.issue})")
    for name, taken in sorted(by_agent.items()):
        posts[f"agent:{name}"] = f"{by} took by force your file claims on: {', '.join(taken)}."
    for scope, body in posts.items():
        if len(body) > messages.MAX_BODY_CHARS:
            body = body[: messages.MAX_BODY_CHARS - 1] + "…"
        messages.record_message(workspace=workspace, scope=scope, body=body, session=session)


# --- release ----------------------------------------------------------------------------


def release_files(
    *,
    workspace: Workspace,
    issue_id: int,
    paths: Sequence[str] | None = None,
    session_id: int | None = None,
) -> list[str]:
    """Release the issue's claims as ``released``: on ``paths`` (all if None), and
    only ``session``'s when given. Paths the issue does not hold are ignored.

    One statement: the claims are row-locked in path order (the order claimers lock
    them in, so a release and a claim on the same paths wait for each other instead
    of deadlocking), then released. The issue and session are looked up only when
    nothing was released, to tell "nothing held" from "no such issue or session".
    """
    wanted = checked_paths(paths) if paths is not None else None
    conditions = ["workspace_id = %s", "issue_id = %s", "released_at IS NULL"]
    params: list[Any] = [workspace.pk, issue_id]
    if session_id is not None:
        conditions.append("session_id = %s")
        params.append(session_id)
    if wanted is not None:
        conditions.append(f"path IN ({placeholders(wanted)})")
        params += wanted
    lock = "FOR UPDATE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {CLAIM} SET released_at = {db_now_sql()}, release_reason = %s
            WHERE released_at IS NULL AND id IN (
                SELECT id FROM {CLAIM} WHERE {" AND ".join(conditions)}
                ORDER BY path {lock})
            RETURNING path
            """,
            [ReleaseReason.RELEASED, *params],
        )
        released = sorted(path for (path,) in cursor.fetchall())
    if not released:
        existing_issue(workspace, issue_id)
        if session_id is not None:
            selectors.get_session(workspace, session_id)
    return released


def release_claims(rows: QuerySet[FileClaim], reason: str) -> list[str]:
    """Release the unreleased ``rows`` with ``reason``; return their paths, sorted.

    The rows are locked in path order first, the order claimers lock them in, so a
    release and a claim on the same paths wait for each other instead of deadlocking.
    """
    with transaction.atomic():
        locked = list(
            rows.filter(released_at__isnull=True)
            .select_for_update()
            .order_by("path")
            .values_list("pk", "path")
        )
        release_unreleased(FileClaim.objects.filter(pk__in=[pk for pk, _ in locked]), reason)
    return [path for _, path in locked]


def release_session_claims(*, session: AgentSession, reason: str) -> int:
    return len(release_claims(FileClaim.objects.filter(session=session), reason))


def release_issue_claims(*, issue: Issue, reason: str) -> int:
    return len(release_claims(FileClaim.objects.filter(issue=issue), reason))


# --- check (read-only) -----------------------------------------------------------------

# A pre-commit guard sends every staged path at once, so a check takes more than a claim.
MAX_CHECK_PATHS = 1000


def check_files(*, workspace: Workspace, issue_id: int, paths: Sequence[str]) -> list[Holder]:
    """The paths ``claim_files`` would refuse to this issue, with their holders.

    The same classification as a claim, read-only: an unreleased claim of another
    issue is a conflict when its holder session is live or when it has no session
    (held until forced); a dead holder is not, since a claim would reclaim it. Paths
    are checked and normalised like a claim's (1-``MAX_CHECK_PATHS`` of them).
    Nothing is written: no claim, no ``claim_conflicts`` row, no reclaim.
    """
    issue = selectors.get_issue(workspace, issue_id)
    if isinstance(paths, str):  # one path, not its letters
        raise InvalidInput("Give the paths as a list of strings.", field="paths")
    if not 1 <= len(paths) <= MAX_CHECK_PATHS:
        raise InvalidInput(
            f"Give 1 to {MAX_CHECK_PATHS} paths, not {len(paths)}.",
            field="paths",
            count=len(paths),
        )
    wanted = normalise_paths(paths)
    held = (
        FileClaim.objects.filter(workspace=workspace, path__in=wanted, released_at__isnull=True)
        .exclude(issue_id=issue.pk)
        .annotate(holder_live=Case(When(live_q("session__"), then=True), default=False))
        .exclude(session__isnull=False, holder_live=False)  # a dead holder: reclaimable
        .select_related("agent")
        .order_by("path")
    )
    return [Holder.of(claim) for claim in held]
