"""The read-only check: what a claim would refuse (the pre-commit guard asks it)."""

from collections.abc import Sequence

from django.db.models import Q

from coordination import selectors
from coordination.liveness import live_q
from coordination.models import FileClaim, Workspace
from coordination.paths import MAX_CHECK_PATHS, checked_paths
from coordination.services.file_claims.claim import Holder


def check_files(*, workspace: Workspace, issue_id: int, paths: Sequence[str]) -> list[Holder]:
    """The paths ``claim_files`` would refuse to this issue, with their holders.

    The same classification as a claim, read-only: an unreleased claim of another
    issue is a conflict when its holder session is live or when it has no session
    (held until forced); a dead holder is not, since a claim would reclaim it. Paths
    are checked and normalised like a claim's (1-``MAX_CHECK_PATHS`` of them).
    Nothing is written: no claim, no ``claim_conflicts`` row, no reclaim.
    """
    issue = selectors.get_issue(workspace, issue_id)
    wanted = checked_paths(paths, limit=MAX_CHECK_PATHS)
    held = (
        FileClaim.objects.unreleased()
        .filter(workspace=workspace, path__in=wanted)
        .exclude(issue_id=issue.pk)
        # Live, or session-less (held until forced); a dead holder is reclaimable.
        .filter(Q(session__isnull=True) | live_q("session__"))
        .select_related("agent")
        .order_by("path")
    )
    return [Holder.of(claim) for claim in held]
