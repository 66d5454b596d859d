"""File claims: path-level reservations against an issue (invariants 5, 6)."""

from coordination.models import AgentSession, FileClaim, Issue
from coordination.services.common import release_unreleased


def release_session_claims(*, session: AgentSession, reason: str) -> int:
    return release_unreleased(FileClaim.objects.filter(session=session), reason)


def release_issue_claims(*, issue: Issue, reason: str) -> int:
    return release_unreleased(FileClaim.objects.filter(issue=issue), reason)
