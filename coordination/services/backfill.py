"""Backfill ``requires_filesystem`` on issues imported from older trackers.

Only positive evidence sets the flag: a wrong ``true`` serialises runs on a
worktree (invariant 10 (lock mode per run)), a wrong ``false`` is what imported data already has.
The assignee's evidence is the seed's, exactly: a role containing one of its
words, in any case (``/cto|engineer|developer|devops|sre/i``, so "Director" matches
too), or a department equal to ``"engineering"`` (``===``: no trimming, no folding).
"""

import re
from dataclasses import dataclass

from django.db.models import Q
from django.utils import timezone

from coordination.models import Agent, Issue, IssueLease, Workspace

ENGINEERING_ROLE_WORDS = ("cto", "engineer", "developer", "devops", "sre")
# JavaScript's /i without the u flag folds ASCII letters only; so does re.ASCII.
ENGINEERING_ROLE = re.compile("|".join(ENGINEERING_ROLE_WORDS), re.IGNORECASE | re.ASCII)
ENGINEERING_DEPARTMENT = "engineering"
BACKFILL_STATUSES = (Issue.Status.BACKLOG, Issue.Status.TODO)


@dataclass(frozen=True)
class FilesystemEvidence:
    issue: Issue
    reasons: tuple[str, ...]


def assignee_evidence(agent: Agent) -> list[str]:
    reasons = []
    if ENGINEERING_ROLE.search(agent.role):
        reasons.append(f"assignee {agent.name!r} has role {agent.role!r}")
    if agent.department == ENGINEERING_DEPARTMENT:
        reasons.append(f"assignee {agent.name!r} is in department {agent.department!r}")
    return reasons


def requires_filesystem_evidence(*, workspace: Workspace | None = None) -> list[FilesystemEvidence]:
    """Issues not yet marked ``requires_filesystem`` with positive evidence that they
    mutate files. Absence of evidence changes nothing: a wrong ``true`` serialises
    runs on a worktree, a wrong ``false`` is what imports already have.

    Evidence: a live lease now (someone is working it), or a backlog/todo issue whose
    assignee's role contains an engineering word, or whose department is exactly
    ``engineering``. Roles are matched in Python, as the seed's regular expression
    does; the database only pre-filters (its case-insensitive match admits at least
    as much on both backends).
    """
    candidates = Issue.objects.filter(requires_filesystem=False).select_related(
        "workspace", "project", "assignee"
    )
    if workspace is not None:
        candidates = candidates.filter(workspace=workspace)
    reasons: dict[int, list[str]] = {}
    found: dict[int, Issue] = {}

    live = IssueLease.objects.live().filter(issue__in=candidates).select_related("agent")
    for lease in live.order_by("issue_id"):
        holder = lease.agent.name if lease.agent else "?"
        reasons.setdefault(lease.issue_id, []).append(
            f"live lease held by session {lease.session_id} ({holder!r})"
        )

    words = Q(assignee__department=ENGINEERING_DEPARTMENT)
    for word in ENGINEERING_ROLE_WORDS:
        words |= Q(assignee__role__icontains=word)
    for issue in candidates.filter(words, status__in=BACKFILL_STATUSES):
        assert issue.assignee is not None  # the filter joined through it
        evidence = assignee_evidence(issue.assignee)
        if evidence:
            reasons.setdefault(issue.pk, []).extend(evidence)
            found[issue.pk] = issue

    missing = [pk for pk in reasons if pk not in found]
    found.update(candidates.in_bulk(missing))
    return [
        FilesystemEvidence(issue=found[pk], reasons=tuple(reasons[pk])) for pk in sorted(reasons)
    ]


def backfill_requires_filesystem(
    *, dry_run: bool, workspace: Workspace | None = None
) -> list[FilesystemEvidence]:
    """Set ``requires_filesystem`` on every issue with evidence; idempotent, since
    only issues still ``false`` are candidates. A dry run returns the same list and
    writes nothing."""
    found = requires_filesystem_evidence(workspace=workspace)
    if not dry_run and found:
        Issue.objects.filter(
            pk__in=[item.issue.pk for item in found], requires_filesystem=False
        ).update(requires_filesystem=True, updated_at=timezone.now())
    return found
