"""Fences: the one rule of every fenced call ([api.md, Fences](docs/api.md#fences)).

A holder may pass back the fence of what it holds: the issue's lease
(``release_issue``, ``claim_files``, ``finish_work``) or its run's worktree lock
(``finish_run``). Without a fence nothing is checked. With one, the call goes ahead
only while that fence is the one of the unreleased lease (lock) it names, and is
otherwise refused 409 ``stale_fence`` (``fence``, ``current_fence`` and a detail
saying what was lost), having changed nothing. An aged-out lease's fence is stale
(invariant 17 (stalled is derived)): ``sql.lease_fence`` does not return it.

``check`` is that rule, and every fenced call asks it, in one of two ways:

- **read, then decide**: the current fence is read and compared (``claim_files``, with
  the lease row ``FOR SHARE`` for the rest of its transaction; ``finish_work`` before
  its transaction and again under the issue's row lock; ``release_issue`` once its
  compare-and-set released nothing, to tell a lost lease from one never held);
- **decided by a compare-and-set**: a release whose ``UPDATE`` carries the fence
  (``AND fence = %s``) is the atomic enforcement, exactly one of it and a reclaim
  winning the row; ``matched`` passes its answer on (``finish_work``'s release,
  ``finish_run``'s lock), and a release that matched nothing is refused here.

The two kinds differ only in what they read: ``LeaseFence`` (the issue's unreleased
lease) and ``LockFence`` (the run's unreleased worktree lock; its refusal names the
worktree's current lock, which may be another run's). The comparison and the error
(``stale``) are shared. A landing tester's batch fence is checked here too
(``landings.BatchFence``: the batch holding the entry, as that tester session tests it),
and the queue's entries are kept or rejected stale by the same comparison
(``is_current``).
"""

from dataclasses import dataclass
from typing import Protocol

from coordination.db import sql
from coordination.db.rows import dialect, fetchone
from coordination.errors import StaleFence
from coordination.models import IssueLease, ResourceHold, Run, WorktreeLock
from coordination.services.locking import share_lease_fence


class Fenced(Protocol):
    def current(self, *, share: bool = False) -> int | None:
        """The fence a holder must pass now: that of the unreleased lease (lock), or
        None if there is none."""
        ...

    def stale(self, fence: int) -> StaleFence:
        """The refusal of ``fence``, naming what is current instead."""
        ...


def check(
    fenced: Fenced, fence: int | None, *, share: bool = False, matched: bool | None = None
) -> None:
    """Raise ``stale_fence`` unless ``fence`` is ``fenced``'s current fence; no fence, no check.

    ``share``: read the current fence with its row ``FOR SHARE``, so it stays current to
    the commit (a lease's: ``locking.share_lease_fence``). ``matched``: the answer of a
    compare-and-set that carried the fence in this transaction: True, the fence was
    current when it ran; False, it named no unreleased row, so the fence is stale
    whatever a read after it would say.
    """
    if fence is None or matched:
        return
    if matched is False or not is_current(fence, fenced.current(share=share)):
        raise fenced.stale(fence)


def is_current(fence: int, current: int | None) -> bool:
    """The comparison ``check`` makes: ``fence`` is the current one, and there is one. For
    a caller that reads many current fences at once and sorts its rows by them rather
    than refusing (the landing queue's stale entries)."""
    return current is not None and fence == current


def stale(detail: str, *, fence: int, current: int | None) -> StaleFence:
    """The error of every kind: 409 ``stale_fence`` with ``fence`` and ``current_fence``."""
    return StaleFence(detail, fence=fence, current_fence=current)


@dataclass(frozen=True)
class LeaseFence:
    """The fence of the issue's lease."""

    issue_id: int

    def current(self, *, share: bool = False) -> int | None:
        if share:
            return share_lease_fence(self.issue_id)
        row = fetchone(sql.lease_fence(dialect(), issue_id=self.issue_id, share=False))
        return int(row[0]) if row else None

    def stale(self, fence: int) -> StaleFence:
        current = self.current()
        if current:
            held = f"its current lease has fence {current}"
        elif IssueLease.objects.unreleased().filter(issue_id=self.issue_id).exists():
            held = "its lease aged out, past the project's max_lease_age_seconds"
        else:
            held = "it has no unreleased lease"
        return stale(
            f"Fence {fence} is not the current lease's on issue {self.issue_id} ({held}): "
            "the lease was lost; nothing was changed.",
            fence=fence,
            current=current,
        )


@dataclass(frozen=True)
class LockFence:
    """The fence of the run's worktree lock (a worktree lock has no age cap)."""

    run_id: int

    def current(self, *, share: bool = False) -> int | None:
        unreleased = WorktreeLock.objects.filter(run_id=self.run_id, released_at__isnull=True)
        return unreleased.values_list("fence", flat=True).first()

    def stale(self, fence: int) -> StaleFence:
        worktree_id = Run.objects.values_list("worktree_id", flat=True).get(pk=self.run_id)
        current = (
            WorktreeLock.objects.filter(worktree_id=worktree_id, released_at__isnull=True)
            .values_list("fence", flat=True)
            .first()
        )
        now = f"; the worktree's current lock has fence {current}" if current else ""
        return stale(
            f"Fence {fence} is not the fence of an unreleased worktree lock of run "
            f"{self.run_id}{now}; nothing was changed.",
            fence=fence,
            current=current,
        )


@dataclass(frozen=True)
class HoldFence:
    """The fence of a session's unreleased hold of a resource (invariant 20 (resources are
    counted))."""

    resource_id: int
    session_id: int

    def current(self, *, share: bool = False) -> int | None:
        unreleased = ResourceHold.objects.unreleased().filter(
            resource_id=self.resource_id, session_id=self.session_id
        )
        return unreleased.values_list("fence", flat=True).first()

    def stale(self, fence: int) -> StaleFence:
        current = self.current()
        return stale(
            f"Fence {fence} is not the fence of the session's hold of the resource (it is "
            f"{current}); nothing was changed.",
            fence=fence,
            current=current,
        )
