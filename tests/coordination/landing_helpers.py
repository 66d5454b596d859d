"""The landing queue's tests share one way to put work in it."""

from collections.abc import Sequence

from coordination.models import AgentSession, Issue, Landing
from coordination.services import file_claims, landings, leases


def queue_work(
    issue: Issue,
    session: AgentSession,
    *,
    paths: Sequence[str] = (),
    branch: str | None = None,
    commit: str = "abcdef0",
) -> Landing:
    """``issue`` leased by ``session``, its ``paths`` claimed, and queued to land."""
    workspace = issue.workspace
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    if paths:
        file_claims.claim_files(
            workspace=workspace, issue_id=issue.pk, paths=list(paths), session_id=session.pk
        )
    return landings.queue_landing(
        workspace=workspace,
        issue_id=issue.pk,
        session_id=session.pk,
        branch=branch or f"work-{issue.pk}",
        commit=commit,
        fence=lease.lease.fence,
    )
