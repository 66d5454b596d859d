"""The lock helpers, and the one account of the order in which operations take locks.

SQLite opens every transaction with ``BEGIN IMMEDIATE``: writers are serialised
already, so every row and advisory lock below is PostgreSQL's (READ COMMITTED), and
each helper only reads there. On PostgreSQL the locks are taken in this global
order, from coarse to fine:

    project row → lease row → issue row → path advisory locks (ascending key;
    exclusive on a claimed path, shared on each directory above it) → claim rows
    (ascending path) → worktree row → run row → worktree-lock row

Per operation (→ = "then, holding what came before"):

============================  =====================================================
operation                     locks, in order
============================  =====================================================
lease claim                   project ``FOR NO KEY UPDATE`` (admission, invariant 3 (the WIP cap);
(``leases.claim_issue``)      found from the issue in the same statement)
                              → issue ``FOR SHARE`` (ordered against a close)
                              → the insert; if the unreleased lease of a dead holder
                              is in its way: that lease row (its reclaim UPDATE),
                              then the insert again
                              → issue row, if it has no assignee or a dead holder's
                              (the assignee UPDATE) → on a takeover, the dead
                              holder's claim rows on the issue, by path (unlocked
                              paths: so last, when nothing after them waits)
file claim                    [with a fence: lease row ``FOR SHARE`` → issue
(``file_claims.claim_files``) ``FOR SHARE NOWAIT``] → advisory locks, by key:
                              each path exclusive, each directory above one shared
                              → claiming and holding issues ``FOR SHARE``, by id
                              → overlapping holders' claim rows ``FOR UPDATE``, by
                              path
release of claims             claim rows ``FOR UPDATE``, by path (one statement)
transition / close            issue ``FOR NO KEY UPDATE`` → its lease row → its claim
(``workflow.transition_issue``) rows, by path
start_work                    lease claim (not its assignee UPDATE) → file claim
                              → transition → the assignee UPDATE → a takeover's
                              claim rows (all one
                              transaction; the project lock queues two starts of one
                              project, so no two hold the same issue share)
finish_work                   issue ``FOR NO KEY UPDATE`` (transition) → claim rows by
                              path → lease row (compare-and-set) → the session's rows
end_session                   session row → lease rows → claim rows by path
                              → worktree-lock rows
run dispatch                  lease claim (its own transaction) → worktree row ``FOR NO
(``runs.dispatch_run``)       KEY UPDATE`` → worktree-lock row
finish_run / operator force   run row → worktree-lock row
heartbeat                     the session row only
resource acquire / release    resource row ``FOR NO KEY UPDATE`` (one grant at a time
(``resources``)               per resource) → its hold rows; a release or an end:
                              the hold rows alone (a grant that waits on them holds
                              only the resource row)
============================  =====================================================

Why no cycle can form:

- Claimers take their advisory locks in ascending key order, in one statement, and
  no other advisory lock of that namespace afterwards: whoever waits for a key holds
  only smaller ones, so no cycle closes among them (mixed modes change nothing: a
  wait is for a key held in a conflicting mode), and the waiter holds no issue or
  claim lock yet. Claim rows are always locked in path order, by claimers and
  releasers alike.
- Issue locks a claim takes are shares: claimers never wait on each other there. A
  close waits for the shares, and the shares are taken before any claim row, so a
  claimer waiting on a claim row the close holds has nothing the close waits for.
- Three operations hold a lease row before their issue's strongest lock. A lease
  claim or ``start_work`` that reclaims a dead holder's lease updates the lease row,
  then assigns or moves its issue (``FOR NO KEY UPDATE``): a fenced file claim,
  which takes the lease row first of all, waits for it holding nothing, not even the
  issue. A close
  holds the issue ``FOR NO KEY UPDATE`` and then updates the lease row: so the
  fenced claim, holding the lease row's share, asks for the issue ``NOWAIT`` and, if
  it is locked, rolls back, waits for the issue alone (``wait_for_issue``) and tries
  again.
- The assignee UPDATE turns the claimer's issue share into a row lock: it waits for
  the other shares (file claimers) to commit. A lease claim makes it last, holding
  only the project and lease rows, which no file claimer waits for (a fenced one
  takes the lease row before the issue, as above). start_work makes it after its
  file claims, with the transition: made at its lease claim, it would hold the issue
  while asking for a path lock that a file claimer holds while waiting for the
  issue's share.
- A takeover releases its dead holder's claims on the issue without their path locks,
  so after the assignee UPDATE and last: a file claimer holding one of those paths
  and the issue's share has committed before the UPDATE got the issue, and a later
  one waits for the issue holding no claim row; nothing after the release waits.
- The fence numbers of leases and worktree locks need the project row and the
  worktree row respectively: every inserter of a number queues on them.
"""

import hashlib

from django.db import OperationalError, connection, transaction

from coordination.db import sql
from coordination.db.rows import dialect, fetchall, fetchone, instance
from coordination.errors import NotFound
from coordination.models import Project
from coordination.paths import lock_nodes as paths_lock_nodes

# PostgreSQL's lock_not_available, raised by NOWAIT.
LOCK_NOT_AVAILABLE = "55P03"


class IssueLocked(Exception):
    """The issue's row is locked for a change (a close, a transition): the caller
    rolls back, waits for that lock alone (``wait_for_issue``) and tries again."""


def path_lock_key(workspace_id: int, path: str) -> int:
    """A stable signed 32-bit key per (workspace, path); a collision only serialises
    two unrelated paths, it never lets two claimers of one path through."""
    digest = hashlib.blake2b(f"{workspace_id}/{path}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_project(*, workspace_id: int, issue_id: int) -> Project:
    """Serialise admission per project until commit (invariant 3 (the WIP cap)): under READ
    COMMITTED two claimers would each count ``cap - 1`` live leases and both insert.
    The project of the workspace's issue, locked, its WIP limit read under the lock;
    404 if there is no such issue."""
    row = fetchone(sql.lock_issue_project(dialect(), workspace_id=workspace_id, issue_id=issue_id))
    if row is None:
        raise NotFound(f"Issue {issue_id} does not exist.")
    return instance(Project, row)


def share_lock_issue(issue_id: int) -> str:
    """The issue's status, read under a share lock: a lease or claim can never be
    admitted on an issue whose close is committing (it would outlive the close)."""
    row = fetchone(sql.issue_status(dialect(), issue_id=issue_id, share=True))
    if row is None:
        raise NotFound(f"Issue {issue_id} does not exist.")
    return str(row[0])


def take_path_locks(*, workspace_id: int, paths: list[str]) -> None:
    """Invariants 5 (all-or-nothing) and 11 (overlap) under READ COMMITTED (PostgreSQL): the
    multi-granularity advisory locks of a claim of ``paths``, exclusive on each path and shared on
    every directory above one, in ascending key order, in one statement. Why they suffice
    and cannot deadlock: ``coordination.services.file_claims.claim``. (The races
    replace this function with one that takes nothing, to show what it prevents.)"""
    nodes = paths_lock_nodes(paths)
    keys, exclusive = sql.ordered_locks(
        (path_lock_key(workspace_id, node), mode) for node, mode in nodes.items()
    )
    namespace = sql.ADVISORY_LOCK_KEYS["file_claim_path"]
    fetchall(sql.path_locks(namespace=namespace, keys=keys, exclusive=exclusive))


def lock_paths_and_issues(
    *, workspace_id: int, issue_id: int, paths: list[str], overlap: sql.Overlap
) -> str:
    """Serialise overlapping claimers, deadlock-free (``take_path_locks``), then
    share-lock the claiming issue and every issue holding an overlapping claim.
    Returns the claiming issue's status, read under the lock; 404 if it was deleted
    since."""
    if not dialect().postgres:
        rows = fetchall(sql.claim_issue_status(issue_id=issue_id))
    else:
        take_path_locks(workspace_id=workspace_id, paths=paths)
        rows = fetchall(
            sql.share_claim_issues(
                dialect(), workspace_id=workspace_id, issue_id=issue_id, overlap=overlap
            )
        )
    status = dict(rows).get(issue_id)
    if status is None:
        raise NotFound(f"Issue {issue_id} does not exist.")
    return str(status)


def share_lease_fence(issue_id: int) -> int | None:
    """The fence of the issue's unreleased lease, its row ``FOR SHARE`` until commit:
    a reclaim, release or close (which UPDATE it) waits, so the fence stays current.
    If one of them is committing, this waits and re-checks ``released_at IS NULL`` on
    the new row: it then finds no lease, never the old fence."""
    row = fetchone(sql.lease_fence(dialect(), issue_id=issue_id, share=True))
    return int(row[0]) if row else None


def share_issue_nowait(issue_id: int) -> None:
    """After ``share_lease_fence``: the issue ``FOR SHARE``, or ``IssueLocked`` if a
    change holds it (that change takes the lease row next: waiting would be a cycle)."""
    if not dialect().postgres:
        return
    try:
        with transaction.atomic():  # a savepoint: the failed lock leaves the rest intact
            fetchone(sql.share_issue_nowait(issue_id=issue_id))
    except OperationalError as error:
        if getattr(error.__cause__, "sqlstate", None) == LOCK_NOT_AVAILABLE:
            raise IssueLocked(issue_id) from None
        raise


def wait_for_issue(issue_id: int) -> None:
    """Wait, holding nothing else, until whoever locked the issue row commits."""
    with transaction.atomic():
        share_lock_issue(issue_id)


def lock_worktree(worktree_id: int) -> None:
    """Queue the inserters of one worktree's lock (its fence is never reused)."""
    assert connection.in_atomic_block, "the worktree row lock must last until commit"
    if dialect().postgres:
        fetchone(sql.lock_worktree_row(worktree_id=worktree_id))
