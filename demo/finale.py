"""The last stretch of the history: two sessions that crashed today, and a crew
at work right now, so the admin and the pages have a present to show.

The crew picks up after the earlier crash; the recent one's lease and claims are
left for a later claimer to reclaim.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, OuterRef

from coordination.errors import FileConflict, WipLimitReached
from coordination.models import Issue, IssueLease
from coordination.services import leases
from demo import world
from demo.simulation import Simulation
from demo.state import Worker

S = Issue.Status

# The hot spot the crew fights over right now: every project edits it.
CONTESTED_NOW = "CHANGELOG.md"

# How to make an issue of each status exist, through the workflow, if the
# history happened to leave none: the status it starts in, then the moves.
WALKS: dict[str, tuple[str, tuple[str, ...]]] = {
    S.BACKLOG: (S.BACKLOG, ()),
    S.TODO: (S.TODO, ()),
    S.IN_PROGRESS: (S.TODO, (S.IN_PROGRESS,)),
    S.IN_REVIEW: (S.TODO, (S.IN_PROGRESS, S.IN_REVIEW)),
    S.DONE: (S.TODO, (S.IN_PROGRESS, S.IN_REVIEW, S.DONE)),
    S.CANCELLED: (S.BACKLOG, (S.CANCELLED,)),
}


@dataclass(frozen=True)
class Crashed:
    """What a crashed agent left behind: its issue (in progress, its lease
    unreleased) and the files it still claims."""

    issue_id: int
    paths: frozenset[str]


def crash(
    sim: Simulation, worker: Worker, project_key: str, when: datetime, *, testing: bool = False
) -> Crashed:
    """At ``when``, ``worker`` starts on an issue, claims its files (no hot spot)
    and dies: no end, just no more heartbeats. ``testing``: it dies while its tests
    hold a test database, which the next to need that one takes back (expired)."""
    with sim.clock.at(when):
        sim.register(worker, slots=1)
        issue = take_fresh(sim, worker, project_key, requires_filesystem=False)
        assert issue is not None  # nobody else is live: the cap cannot refuse
        paths = [p for p in sim.plans[issue.pk].footprint if p not in world.HOT_SPOTS]
        sim.claim(worker, paths)
        if testing:
            sim.hold_test_db(worker)  # nobody else is live: both are free
        sim.leave(worker, crash=True)
    return Crashed(issue_id=issue.pk, paths=frozenset(paths))


def crew_at_work(sim: Simulation, *, earlier: Crashed, recent: Crashed) -> None:
    """Right now, in order:

    - the lead (never bound to a worktree) tries a docs issue that needs a
      filesystem: docs has no primary worktree, so the run is skipped; it moves on
      to an API issue on the integration checkout, claims its files and the hot
      spot, and starts an exclusive run that is still running;
    - a rival on a core issue, also on the integration checkout, is refused the hot
      spot and finds the worktree busy (its run is cancelled, its lease kept);
    - a finisher writing release notes takes the hot spot from the lead by force,
      hands its docs issue in for review (the lead then claims the file back), and
      picks up the issue of the earlier crash, reclaiming its lease and files;
    - one more agent fills the web project's cap, and the next is refused by it
      and goes to docs instead;
    - the test databases: the lead's running run holds one while its tests run (taking
      back, expired, the one the earlier crash died holding), the finisher's tests are
      done, and the others at work try for one to test their work: the first gets the
      second database, the next is refused (both in use).

    Nobody touches what the recent crash holds: the crew only takes issues with
    no lease at all, and keeps off its files.
    """
    crew = sim.workers[: min(5, len(sim.workers) - 1)]
    for worker in crew:
        sim.register(worker, slots=1)
    lead, rival, finisher, *rest = crew
    if take_fresh(sim, lead, "docs", requires_filesystem=True):
        sim.dispatch(lead)  # unresolved: skipped, lease released, issue back to todo
    if take_fresh(sim, lead, "api", worktree=world.INTEGRATION_WORKTREE):
        claim_avoiding(sim, lead, recent, extra=CONTESTED_NOW)
        sim.dispatch(lead)  # and never finished: the worktree stays locked now
        if lead.run_id is not None and not lead.holds_test_db:
            sim.hold_test_db(lead)  # its tests are running now
    if take_fresh(sim, rival, "core", worktree=world.INTEGRATION_WORKTREE):
        claim_avoiding(sim, rival, recent, extra=CONTESTED_NOW)
        sim.dispatch(rival)  # busy: cancelled
    if take_fresh(sim, finisher, "docs", requires_filesystem=False):
        claim_avoiding(sim, finisher, recent, extra=CONTESTED_NOW, force=True)
        sim.dispatch(finisher)
        if finisher.run_id is not None:
            sim.finish_run(finisher, failed=False)
        sim.release_test_db(finisher)
        sim.hand_in(finisher)
    if lead.issue_id is not None:
        claim_avoiding(sim, lead, recent, extra=CONTESTED_NOW)
    rescue(sim, finisher, earlier)
    for worker in rest:
        for key in ("web", "docs"):
            if take_fresh(sim, worker, key, requires_filesystem=False):
                claim_avoiding(sim, worker, recent)
                break
    for worker in rest:
        if worker.issue_id is not None:
            sim.hold_test_db(worker)


def rescue(sim: Simulation, worker: Worker, crashed: Crashed) -> None:
    """Carry on a crashed agent's issue: the dead holder's lease and file claims
    are reclaimed ``expired`` by these very calls."""
    assert worker.session_id is not None
    leases.claim_issue(
        workspace=sim.workspace, issue_id=crashed.issue_id, session_id=worker.session_id
    )
    sim.start_on(worker, Issue.objects.get(workspace=sim.workspace, pk=crashed.issue_id))
    sim.claim(worker, sorted(crashed.paths))


def take_fresh(
    sim: Simulation,
    worker: Worker,
    project_key: str,
    *,
    requires_filesystem: bool = True,
    worktree: str | None = None,
) -> Issue | None:
    """Lease the oldest unleased todo issue of the kind (creating one if there is
    none) and start on it; None if the project's WIP cap refuses."""
    assert worker.session_id is not None
    leased = IssueLease.objects.unreleased().filter(issue=OuterRef("pk"))
    kind = Issue.objects.filter(
        workspace=sim.workspace,
        project__key=project_key,
        status=S.TODO,
        requires_filesystem=requires_filesystem,
    )
    kind = kind.filter(worktree__slug=worktree) if worktree else kind.filter(worktree=None)
    issue = kind.filter(~Exists(leased)).order_by("id").first() or sim.create_issue(
        world.PROJECTS_BY_KEY[project_key],
        status=S.TODO,
        requires_filesystem=requires_filesystem,
        worktree=worktree,
    )
    try:
        leases.claim_issue(workspace=sim.workspace, issue_id=issue.pk, session_id=worker.session_id)
    except WipLimitReached:
        return None
    sim.start_on(worker, issue)
    return issue


def claim_avoiding(
    sim: Simulation,
    worker: Worker,
    crashed: Crashed,
    *,
    extra: str | None = None,
    force: bool = False,
) -> None:
    """Claim the issue's files (plus ``extra``) except the crashed agent's; if
    refused, claim the free ones and tell the holders."""
    assert worker.issue_id is not None
    wanted = list(sim.plans[worker.issue_id].footprint)
    if extra is not None:
        wanted.append(extra)
    paths = sorted({path for path in wanted if path not in crashed.paths})
    try:
        sim.claim(worker, paths, force=force)
    except FileConflict as refused:
        sim.settle_for_the_rest(worker, paths, refused)


def ensure_every_status(sim: Simulation) -> None:
    """Every workflow status is on show; a month of history nearly always sees to
    that, and a tiny one is topped up through the workflow like any issue."""
    for status, (start, moves) in WALKS.items():
        if Issue.objects.filter(workspace=sim.workspace, status=status).exists():
            continue
        issue = sim.create_issue(world.PROJECTS_BY_KEY["docs"], status=start)
        for to in moves:
            sim.move(issue.pk, to, by_human=True)
