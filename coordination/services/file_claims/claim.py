"""Claiming files: all-or-nothing, overlap-free under concurrency (invariants 4 (stale reclaim), 5
(all-or-nothing), 6 (paths are literal), 8 (append-only logs) and 11 (overlap)).

A claim is a file (``src/a.py``) or a directory (``src/api/``, everything under it);
two claims overlap when they are equal or one is a directory the other lies under
(``coordination.paths``). ``claim_files`` runs one transaction per attempt that locks
the paths and their issues, then the overlapping holders' rows
(``coordination.services.locking`` gives the order), and decides: refuse (write the
conflict log, commit, then raise; or, for ``start_work``, return the refusal unlogged:
``claim_or_refusal``), or reclaim dead holders, override (``force``) and
insert the rest with ``ON CONFLICT DO NOTHING``. An insert that returns no row means
someone the locks do not cover got there first: the whole attempt is rolled back and
retried, within ``reclaim``'s budget, and then reported as a conflict — never a
partial claim, never an ``IntegrityError``.

**Why two overlapping claims of different issues can never both be held.** The
partial unique index ``one_unreleased_claim_per_path`` sees equal paths only; a
subtree needs more.

- SQLite: every transaction begins ``BEGIN IMMEDIATE`` (``projektor.settings``), so a
  claim is the only writer from its first statement to its commit: nothing commits
  between its look for overlapping holders and its insert.
- PostgreSQL (READ COMMITTED): multi-granularity locking (Gray et al., 1975) with
  transaction-scoped advisory locks, one key per node of the tree (a file, or a
  directory spelled ``d/``). A claim of ``P`` takes ``P`` exclusively and every
  directory above ``P`` in intention (shared) mode, before it looks for holders, and
  keeps them until it commits. Let transactions A and B of different issues claim
  overlapping ``P`` and ``Q``: then ``P = Q`` (both want that key exclusively) or one,
  say ``P``, is a directory above ``Q`` (A wants ``P`` exclusively, B wants it shared).
  Either way their locks conflict, so one of them, A, takes that key first and B gets
  it only after A has committed or rolled back. B's look for holders is a later
  statement, and READ COMMITTED gives each statement a fresh snapshot: it sees A's
  committed claim (``P`` is among ``Q``'s ancestors, found by equality; or ``Q`` is a
  directory and ``P`` lies in its range ``'Q' < P < 'Q' with '/' → '0'``; or they are
  equal), and B refuses, or releases A's claim (a dead holder, or ``force``) before
  it inserts. A claim committed long before is seen the same way. Releases and
  reclaims only end claims, so they cannot make an overlap; each dead holder found
  is released in the same transaction, so a session that revives later holds
  nothing that overlaps. A hash collision between two keys only makes two claimers
  wait for each other.
- Disjoint claims never wait on each other: their exclusive keys differ, and the
  only keys they share are directories above both, taken shared by both (``src/``
  for ``src/api/`` and ``src/web/x.py``).

**Why no deadlock.** Each attempt takes all its advisory locks in one statement, in
ascending key order, a key wanted both ways taken exclusively only, and takes no
other lock of that namespace afterwards: a transaction waiting for a key holds only
smaller keys, and one holding a key waits only for larger ones or for the locks
after them, so no cycle closes among the keys (the modes do not matter: a wait is
for a key held in a conflicting mode). After them come the issue shares and the
holders' claim rows, in path order, as in ``locking``; a claimer waiting for path
locks holds no issue or row lock yet.

**Flat cost.** The holders are found by index scans on that partial unique index,
whose ``path`` column compares in byte order on both databases (migration 0011):
equality for the paths and their ancestors, one range scan per requested directory.
An attempt sends the same statements however many paths it asks for and however
many claims are held elsewhere (``tests/coordination/api/query_counts.py``).
"""

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from coordination.db import sql
from coordination.db.rows import dialect, fetchall, fetchone, instance, take
from coordination.errors import (
    InvalidInput,
    InvalidTransition,
    NotFound,
    SessionNotLive,
)
from coordination.models import (
    Agent,
    AgentSession,
    EventType,
    FileClaim,
    Issue,
    ReleaseReason,
    Workspace,
)
from coordination.paths import (
    MAX_PATHS,
    NormalisedPaths,
    checked_paths,
)
from coordination.services import events, fences, locking, messages, reclaim
from coordination.services.file_claims.check import Holder, overlapping_claims
from coordination.services.file_claims.refusal import (
    MAX_CONFLICTS_SHOWN as MAX_CONFLICTS_SHOWN,  # the benchmarks' direct path reads it here
)
from coordination.services.file_claims.refusal import (
    Refusal,
    holders,
    log_conflicts,
    log_refusal,
    pairs_of,
)
from coordination.services.file_claims.release import release_claims


@dataclass(frozen=True)
class ClaimedFiles:
    claims: list[FileClaim]
    reclaimed: list[str]
    overridden: list[Holder]


# --- the statements of one attempt ------------------------------------------------------


@dataclass
class ClaimContext:
    """A claim's first read (``sql.claim_context``): the issue, and the claiming
    session with its agent and whether it is live (None without a session id, or
    when the workspace has no such session)."""

    issue: Issue
    session: AgentSession | None
    live: bool

    @classmethod
    def read(cls, workspace: Workspace, issue_id: int, session_id: int | None) -> "ClaimContext":
        statement = sql.claim_context(
            dialect(), workspace_id=workspace.pk, issue_id=issue_id, session_id=session_id
        )
        row = fetchone(statement)
        if row is None:
            raise NotFound(f"Issue {issue_id} does not exist.")
        issue, at = take(Issue, row, 0)
        session, at = take(AgentSession, row, at)
        agent, _ = take(Agent, row, at)
        assert issue is not None
        if session is not None:
            assert agent is not None
            session.agent = agent
        return cls(issue=issue, session=session, live=bool(row[-1]))

    def claimer(self, session_id: int) -> AgentSession:
        """The claiming session, if it is live: else 400 (it is named in the body) or
        409 ``session_not_live``."""
        if self.session is None:
            raise InvalidInput(f"Session {session_id} does not exist.")
        if not self.live:
            raise SessionNotLive(f"Session {session_id} is not live.")
        return self.session


def insert_claims(
    *, workspace_id: int, issue_id: int, session: AgentSession | None, paths: list[str]
) -> list[FileClaim]:
    """Insert one unreleased claim per path; return the new claims, in path order. A
    path someone else holds gives no row: the caller rolls everything back."""
    if not paths:
        return []
    statement = sql.insert_claims(
        dialect(),
        workspace_id=workspace_id,
        issue_id=issue_id,
        session_id=session.pk if session is not None else None,
        agent_id=session.agent_id if session is not None else None,
        paths=paths,
    )
    claims = [instance(FileClaim, row) for row in fetchall(statement)]
    for claim in claims:
        claim.agent = session.agent if session is not None else None
    return sorted(claims, key=lambda claim: claim.path)


# --- claim --------------------------------------------------------------------------------


def claim_files(
    *,
    workspace: Workspace,
    issue_id: int,
    paths: Sequence[str] | NormalisedPaths,
    session_id: int | None = None,
    force: bool = False,
    fence: int | None = None,
) -> ClaimedFiles:
    """Claim every path for the issue, or none (invariants 4 (stale reclaim), 5 (all-or-nothing), 6
    (paths are literal), 8 (append-only logs) and 11 (overlap)).

    A path ending in ``/`` claims the directory and everything under it. With
    ``fence`` (the fence of the issue's lease, docs/api.md "Fences"), the claim is
    made only while that lease is the issue's unreleased one: otherwise
    ``stale_fence``, and nothing is claimed or logged.

    - a path this issue already holds (spelled the same) is kept (idempotent) and
      returned in claims; the issue's other claims may overlap it;
    - an overlapping claim whose holder session is not live is reclaimed ``expired``,
      no conflict;
    - an overlapping claim of another issue whose holder is live, or that has no
      session, is a conflict: without ``force`` the request is refused (409 naming
      every holder) after its conflict rows commit; with ``force`` the holders are
      released ``overridden`` and messages name the displaced issues.
    """
    outcome = _claim(
        workspace=workspace,
        issue_id=issue_id,
        paths=paths,
        session_id=session_id,
        force=force,
        fence=fence,
        log=True,
    )
    if isinstance(outcome, Refusal):
        raise outcome.error()
    return outcome


def claim_or_refusal(
    *, workspace: Workspace, issue_id: int, paths: NormalisedPaths, session_id: int
) -> ClaimedFiles | Refusal:
    """``claim_files`` as a step of a larger change (``start_work``), without force or
    fence: a refusal is returned, not logged and not raised, so the caller rolls its
    change back and logs it once after (``log_refusal``), for whom it names."""
    return _claim(
        workspace=workspace,
        issue_id=issue_id,
        paths=paths,
        session_id=session_id,
        force=False,
        fence=None,
        log=False,
    )


def _claim(
    *,
    workspace: Workspace,
    issue_id: int,
    paths: Sequence[str] | NormalisedPaths,
    session_id: int | None,
    force: bool,
    fence: int | None,
    log: bool,
) -> ClaimedFiles | Refusal:
    # Raw paths are checked once, by the first attempt, once it has found the issue
    # (404 first); normalised ones were checked where they entered.
    wanted = functools.cache(
        lambda: (
            paths.as_list()
            if isinstance(paths, NormalisedPaths)
            else checked_paths(paths, limit=MAX_PATHS)
        )
    )

    def attempt(number: int) -> ClaimedFiles | Refusal:
        try:
            return _attempt(
                workspace=workspace,
                issue_id=issue_id,
                session_id=session_id,
                wanted_paths=wanted,
                force=force,
                fence=fence,
                log=log,
            )
        except locking.IssueLocked:  # see locking: a fenced claim met a close
            locking.wait_for_issue(issue_id)
            raise reclaim.Retry from None

    return reclaim.attempts(attempt, exhausted=lambda: changed_hands(workspace, issue_id, wanted()))


def changed_hands(workspace: Workspace, issue_id: int, wanted: list[str]) -> Refusal:
    """Once the attempts are spent (each followed a path that changed hands under it):
    the holders as they stand, rather than an unbounded wait."""
    current = [
        found.claim
        for found in overlapping_claims(workspace.pk, wanted, lock=False)
        if found.claim.issue_id != issue_id and found.holds
    ]
    return Refusal(
        pairs=pairs_of(wanted, current),
        paths=wanted,
        detail="The paths changed hands while they were claimed; nothing was claimed. Retry.",
    )


def _attempt(
    *,
    workspace: Workspace,
    issue_id: int,
    session_id: int | None,
    wanted_paths: Callable[[], list[str]],
    force: bool,
    fence: int | None = None,
    log: bool = True,
) -> ClaimedFiles | Refusal:
    with events.change():
        # The issue (404 first, then the paths' 400) and the session, in one read.
        context = ClaimContext.read(workspace, issue_id, session_id)
        issue, paths = context.issue, wanted_paths()
        if fence is not None:
            # Lease, then issue, before the path locks (locking): a refusal has
            # written nothing, and the lease cannot be reclaimed under this claim.
            fences.check(fences.LeaseFence(issue.pk), fence, share=True)
            locking.share_issue_nowait(issue.pk)  # IssueLocked: roll back, wait, retry
        session = context.claimer(session_id) if session_id is not None else None
        # Read under the issue lock: closing releases the issue's claims, so a claim
        # admitted after it would outlive the close and block others until forced.
        status = locking.lock_paths_and_issues(
            workspace_id=workspace.pk, issue_id=issue.pk, paths=paths, overlap=sql.overlap_of(paths)
        )
        if status in Issue.CLOSED_STATUSES:
            raise InvalidTransition(f"Issue {issue.pk} is {status}; reopen it to claim files.")
        wanted = set(paths)
        kept: list[FileClaim] = []
        dead: list[FileClaim] = []
        contested: list[FileClaim] = []
        for found in overlapping_claims(workspace.pk, paths, lock=True):
            if not found.holds:
                dead.append(found.claim)
            elif found.claim.issue_id == issue.pk:
                if found.claim.path in wanted:
                    kept.append(found.claim)
            else:
                contested.append(found.claim)  # live, or session-less: held until forced
        pairs = pairs_of(paths, contested)
        if contested and not force:
            # Commit the conflict log only: dead holders are left for the next
            # successful claim, so a refusal changes nothing else (invariant 6 (paths are literal)).
            # Unlogged (``claim_or_refusal``), the caller logs it once, after its rollback.
            refusal = Refusal(pairs=pairs, paths=paths)
            if log:
                log_refusal(workspace=workspace, issue=issue, session=session, refusal=refusal)
            return refusal
        log_conflicts(workspace=workspace, issue=issue, session=session, pairs=pairs, forced=force)
        taker = events.holder(session.pk, session.agent.name) if session is not None else None
        if dead:
            reclaimed = fetchall(
                sql.release_dead_claims(
                    dialect(), ids=[claim.pk for claim in dead], reason=ReleaseReason.EXPIRED
                )
            )
            if len(reclaimed) != len(dead):
                raise reclaim.Retry  # revived by a heartbeat since we looked
            released = [sql.ReleasedClaim(*row[:5]) for row in reclaimed]
            events.claims_released(workspace.pk, released, reason=ReleaseReason.EXPIRED, by=taker)
        if contested:
            overridden = release_claims(
                reason=ReleaseReason.OVERRIDDEN,
                workspace_id=workspace.pk,
                ids=[claim.pk for claim in contested],
                by=taker,
            )
            if len(overridden) != len(contested):
                raise reclaim.Retry
            messages.announce_override(
                workspace=workspace,
                issue_id=issue.pk,
                session=session,
                taken=[
                    (claim.path, claim.issue_id, claim.agent.name if claim.agent else None)
                    for claim in contested
                ],
            )
        kept_paths = {claim.path for claim in kept}
        fresh = [path for path in paths if path not in kept_paths]
        inserted = insert_claims(
            workspace_id=workspace.pk, issue_id=issue.pk, session=session, paths=fresh
        )
        if len(inserted) != len(fresh):
            raise reclaim.Retry  # a path was taken after our locks: roll back the whole attempt
        if inserted:
            events.record(
                workspace.pk,
                EventType.CLAIMS_GRANTED,
                project_id=issue.project_id,
                issue_id=issue.pk,
                session_id=session.pk if session is not None else None,
                agent_id=session.agent_id if session is not None else None,
                data={"paths": [claim.path for claim in inserted]},
            )
        return ClaimedFiles(
            claims=sorted(kept + inserted, key=lambda claim: claim.path),
            reclaimed=sorted(claim.path for claim in dead),
            overridden=holders(pairs),
        )
