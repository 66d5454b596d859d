"""A refused file claim and its log (invariants 5 (all-or-nothing), 8 (append-only logs) and 11
(overlap)): the (requested path, holder) pairs, the 409 ``file_conflict`` that names them,
and what survives the refusal: one ``claim_conflicts`` row per pair and ``claims.refused``.

``claim_files`` writes the log in its refused attempt's transaction and commits it before
it raises; ``start_work``, whose file claim is one step of its transaction, gets the
``Refusal`` back unlogged, rolls everything back and writes the log once (``log_refusal``).
"""

from dataclasses import dataclass
from typing import Any

from coordination.db import sql
from coordination.db.rows import dialect, execute
from coordination.errors import FileConflict
from coordination.models import Agent, AgentSession, EventType, FileClaim, Issue, Workspace
from coordination.paths import meeting_point, overlapping_pairs
from coordination.services import events, logs
from coordination.services.file_claims.check import Holder

# A 409 (and its claims.refused event) lists this many conflicts, then counts the rest
# in ``conflicts_total``; the conflict log keeps every one.
MAX_CONFLICTS_SHOWN = 100
CONFLICT_ROWS_PER_INSERT = 1000  # 9 parameters each: far below every backend's limit

# (requested path, the claim of another issue that overlaps it)
Pair = tuple[str, FileClaim]


@dataclass(frozen=True)
class Refusal:
    """A refused claim: every (requested path, holder) pair, the paths requested
    (normalised) and, when the attempts were spent, why (``changed_hands``)."""

    pairs: list[Pair]
    paths: list[str]
    detail: str | None = None

    def error(self) -> "ClaimRefused":
        return file_conflict(self.pairs, requested=len(self.paths), detail=self.detail)


class ClaimRefused(FileConflict):
    """``file_conflict``, with every (requested path, holder) pair it names: the
    conflict log's rows."""

    def __init__(self, detail: str, *, pairs: list[Pair], **extra: Any) -> None:
        super().__init__(detail, **extra)
        self.pairs = pairs


def pairs_of(paths: list[str], claims: list[FileClaim]) -> list[Pair]:
    """Each (requested path, claim) that overlap, by path, then held path."""
    by_path = {claim.path: claim for claim in claims}
    return [(path, by_path[held]) for path, held in overlapping_pairs(paths, by_path)]


def holders(pairs: list[Pair]) -> list[Holder]:
    return [Holder.of(claim, requested=path) for path, claim in pairs]


def log_conflicts(
    *,
    workspace: Workspace,
    issue: Issue,
    session: AgentSession | None,
    pairs: list[Pair],
    forced: bool,
    agent: Agent | None = None,
) -> None:
    """One append-only ``claim_conflicts`` row per (requested path, overlapping holder)
    (invariants 8 (append-only logs) and 11 (overlap)), at the deeper of the two paths, where they
    meet; in one INSERT per thousand rows. The rejected agent is the session's, or ``agent`` for a
    claimer without one."""
    rejected_agent_id = session.agent_id if session is not None else (agent.pk if agent else None)
    rows = [
        sql.ConflictRow(
            path=meeting_point(path, claim.path),
            rejected_issue_id=issue.pk,
            rejected_session_id=session.pk if session is not None else None,
            rejected_agent_id=rejected_agent_id,
            holding_issue_id=claim.issue_id,
            holding_session_id=claim.session_id,
            holding_agent_id=claim.agent_id,
        )
        for path, claim in pairs
    ]
    for start in range(0, len(rows), CONFLICT_ROWS_PER_INSERT):
        batch = rows[start : start + CONFLICT_ROWS_PER_INSERT]
        execute(
            sql.insert_conflicts(
                dialect(),
                workspace_id=workspace.pk,
                rows=batch,
                forced=forced,
                earlier_by=logs.recording_offset(),
            )
        )


def log_refusal(
    *,
    workspace: Workspace,
    issue: Issue,
    session: AgentSession | None,
    refusal: Refusal,
    agent: Agent | None = None,
) -> None:
    """A refusal's own log, which survives it: its conflict rows (``forced = false``)
    and its ``claims.refused``. Inside ``events.change()``."""
    log_conflicts(
        workspace=workspace,
        issue=issue,
        session=session,
        agent=agent,
        pairs=refusal.pairs,
        forced=False,
    )
    announce_refusal(
        workspace=workspace,
        issue=issue,
        session=session,
        agent=agent,
        paths=refusal.paths,
        conflicts=holders(refusal.pairs),
    )


def shown(conflicts: list[Holder]) -> dict[str, Any]:
    """The conflicts as a 409 and its event show them: the first hundred, and how many."""
    return {
        "conflicts": [holder.as_dict() for holder in conflicts[:MAX_CONFLICTS_SHOWN]],
        "conflicts_total": len(conflicts),
    }


def announce_refusal(
    *,
    workspace: Workspace,
    issue: Issue,
    session: AgentSession | None,
    paths: list[str],
    conflicts: list[Holder],
    agent: Agent | None = None,
) -> None:
    """``claims.refused``: the requested paths and the 409's conflict entries, written
    with the conflict rows (the refusal's own log)."""
    events.record(
        workspace.pk,
        EventType.CLAIMS_REFUSED,
        project_id=issue.project_id,
        issue_id=issue.pk,
        session_id=session.pk if session is not None else None,
        agent_id=session.agent_id if session is not None else (agent.pk if agent else None),
        data={"paths": paths, **shown(conflicts)},
    )


def file_conflict(pairs: list[Pair], *, requested: int, detail: str | None = None) -> ClaimRefused:
    contested = len({path for path, _ in pairs})
    return ClaimRefused(
        detail
        or f"{contested} of {requested} paths are claimed by other issues; nothing was claimed.",
        pairs=pairs,
        **shown(holders(pairs)),
    )
