"""What a claim would be refused on, read-only: the holders of the paths that overlap
a claim (invariant 11 (overlap)), and the check the pre-commit guard asks (``check_files``)."""

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from coordination.db import sql
from coordination.db.rows import dialect, fetchall, take
from coordination.models import Agent, FileClaim, Workspace
from coordination.paths import MAX_CHECK_PATHS, checked_paths, overlapping_pairs
from coordination.selectors import lookups


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) what a path asked for: ``path`` the requested path,
    ``held_path`` the holder's claim that overlaps it (``path`` itself, a directory
    above it, or a path under it: invariant 11 (overlap)), its issue, session and agent name."""

    path: str
    held_path: str
    issue: int
    session: int | None
    agent: str | None

    @classmethod
    def of(cls, claim: FileClaim, *, requested: str | None = None) -> "Holder":
        agent = claim.agent.name if claim.agent is not None else None
        return cls(
            path=claim.path if requested is None else requested,
            held_path=claim.path,
            issue=claim.issue_id,
            session=claim.session_id,
            agent=agent,
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HeldClaim:
    """An unreleased claim and whether its holder session is live now."""

    claim: FileClaim
    live: bool

    @property
    def holds(self) -> bool:
        """Held against others: its holder is live, or it has no session (held until
        forced). A dead holder's claim is the next claimer's to reclaim."""
        return self.live or self.claim.session_id is None


def overlapping_claims(workspace_id: int, paths: Sequence[str], *, lock: bool) -> list[HeldClaim]:
    """The unreleased claims that overlap ``paths`` (normalised), with their agent, in
    path order; ``lock``: row-locked until commit (a claim's classification). One
    statement, whatever the number of paths or of claims held (invariant 11 (overlap))."""
    statement = sql.overlapping_holders(
        dialect(), workspace_id=workspace_id, overlap=sql.overlap_of(paths), lock=lock
    )
    held = []
    for row in fetchall(statement):
        claim, at = take(FileClaim, row, 0)
        assert claim is not None
        claim.agent, _ = take(Agent, row, at)
        held.append(HeldClaim(claim=claim, live=bool(row[-1])))
    return held


def holders_of(requested: Sequence[str], claims: Iterable[FileClaim]) -> list[Holder]:
    """One ``Holder`` per (requested path, claim) pair that overlaps, by requested
    path, then held path."""
    by_path = {claim.path: claim for claim in claims}
    return [
        Holder.of(by_path[held], requested=path)
        for path, held in overlapping_pairs(requested, by_path)
    ]


def check_files(*, workspace: Workspace, issue_id: int, paths: Sequence[str]) -> list[Holder]:
    """What a file claim by this issue would be refused on, with the holders.

    The same classification as ``file_claims.claim_files``, read-only: an unreleased
    claim of another issue that overlaps a path (invariant 11 (overlap): the path itself, a
    directory claim above it, or, for a directory, a claim under it) is a conflict
    when its holder session is live or it has no session (held until forced); a dead
    holder is not, since a claim would reclaim it. Paths are checked and normalised
    like a claim's (1 to ``MAX_CHECK_PATHS``: a pre-commit guard sends every staged
    path at once), except that they are names of the tree, so ``*``, ``?`` and ``[``
    are characters there (``literal``).
    """
    issue = lookups.get_issue(workspace, issue_id)
    wanted = checked_paths(paths, limit=MAX_CHECK_PATHS, literal=True)
    held = [
        found.claim
        for found in overlapping_claims(workspace.pk, wanted, lock=False)
        if found.claim.issue_id != issue.pk and found.holds
    ]
    return holders_of(wanted, held)
