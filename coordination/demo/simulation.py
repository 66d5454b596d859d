"""A fleet of agents working the demo workspace, one time slot at a time.

Every change goes through the coordination services, exactly as the API would
make it; refusals (a WIP cap, a contested file, a busy or unresolved worktree)
are the services' own, caught the way an agent would catch them. Randomness comes
from one seeded generator and every query that feeds a decision is ordered, so a
seed always produces the same history.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Exists, OuterRef

from coordination.demo import world
from coordination.demo.clock import Clock
from coordination.errors import (
    FileConflict,
    LeaseHeld,
    WipLimitReached,
    WorktreeBusy,
    WorktreeUnresolved,
)
from coordination.models import Issue, IssueLease, Workspace
from coordination.services import (
    agents,
    file_claims,
    leases,
    messages,
    projects,
    workflow,
    worktrees,
)

S = Issue.Status

# How a fleet behaves; tuned so a default month has a few hundred sessions,
# thousands of file claims, hundreds of conflicts and tens of WIP denials.
START_CHANCE = 0.28  # an idle agent opens a session in a slot
LONGEST_SESSION = 3  # slots
CRASH_CHANCE = 0.12  # a session dies instead of ending
FORCE_CHANCE = 0.2  # a refused claimer takes the files by force
FAILURE_CHANCE = 0.08  # a run fails
HOME_CHANCE = 0.65  # an agent looks in its own project first
DONE_CHANCE = 0.7  # a reviewer accepts an issue in review
PRIORITIES = (0, 1, 2, 3, 4)  # none, urgent, high, medium, low
PRIORITY_WEIGHTS = (3, 1, 2, 4, 2)
BOUNCE_CHANCE = 0.12  # a reviewer sends it back to work


@dataclass
class Worker:
    """What an agent is doing right now, as far as the simulation knows."""

    spec: world.AgentSpec
    session_id: int | None = None
    slots_left: int = 0
    issue_id: int | None = None
    run_id: int | None = None
    registered: bool = False

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class Plan:
    """An issue's hidden truth: which files it touches and how much work it is."""

    project: str
    footprint: tuple[str, ...]
    effort: int
    progress: int = 0


@dataclass
class Simulation:
    workspace: Workspace
    rng: random.Random
    clock: Clock
    workers: list[Worker]
    plans: dict[int, Plan] = field(default_factory=dict)
    skipped: list[int] = field(default_factory=list)  # issues whose run was unresolved

    # --- setup ------------------------------------------------------------------

    def build(self) -> None:
        """Worktrees and projects; agents appear when they first register."""
        for slug, name in world.SHARED_WORKTREES:
            self.add_worktree(slug, name, branch="main")
        for worker in self.workers:
            if worker.spec.worktree is not None:
                self.add_worktree(
                    worker.spec.worktree, f"{worker.name}'s checkout", branch=f"agent/{worker.name}"
                )
        for spec in world.PROJECTS:
            projects.create_project(
                workspace=self.workspace,
                key=spec.key,
                name=spec.name,
                agent_wip_limit=spec.wip_limit,
                primary_worktree=spec.primary_worktree,
            )

    def add_worktree(self, slug: str, name: str, *, branch: str) -> None:
        worktrees.create_worktree(
            workspace=self.workspace,
            slug=slug,
            name=name,
            path=f"/srv/projektor/worktrees/{slug}",
            branch=branch,
        )

    # --- the calendar -------------------------------------------------------------

    def run_day(self, slots: list[datetime], *, onboarding: bool) -> None:
        """One day: humans plan in the morning, agents work the slots, humans
        review in the evening. On the first day every agent shows up once."""
        first_slot = (
            {w.name: self.rng.randrange(len(slots)) for w in self.workers} if onboarding else {}
        )
        for index, when in enumerate(slots):
            with self.clock.at(when):
                if index == 0:
                    self.plan_the_day(onboarding=onboarding)
                joining = [name for name, slot in first_slot.items() if slot == index]
                self.open_sessions(len(slots) - index, joining=joining)
                self.work_slot()
                if index == len(slots) - 1:
                    self.review()

    def open_sessions(self, remaining: int, *, joining: list[str]) -> None:
        """Working agents heartbeat first, so nobody reclaims what they still hold;
        then idle ones may start."""
        for worker in self.workers:
            if worker.session_id is not None:
                agents.heartbeat_session(workspace=self.workspace, session_id=worker.session_id)
        for worker in self.workers:
            if worker.session_id is None and (
                worker.name in joining or self.rng.random() < START_CHANCE
            ):
                self.register(worker, slots=self.rng.randint(1, min(LONGEST_SESSION, remaining)))

    def register(self, worker: Worker, *, slots: int) -> None:
        session = agents.register_session(
            workspace=self.workspace,
            agent_name=worker.name,
            role=worker.spec.profile.role,
            department=worker.spec.profile.department,
            worktree_slug=worker.spec.worktree,
        )
        worker.session_id = session.pk
        worker.slots_left = slots
        if not worker.registered:
            worker.registered = True
            self.post(worker, f"agent:{worker.name}", f"{worker.name} joined the fleet.")

    def work_slot(self) -> None:
        active = [w for w in self.workers if w.session_id is not None]
        self.rng.shuffle(active)
        for worker in active:
            self.work(worker)
        for worker in active:
            self.wrap_up(worker)

    # --- humans -------------------------------------------------------------------

    def plan_the_day(self, *, onboarding: bool) -> None:
        fleet = len(self.workers)
        count = fleet * 2 if onboarding else self.rng.randint(max(1, fleet // 2), fleet)
        for _ in range(count):
            self.create_issue()
        self.groom()
        self.fix_unresolved()
        self.cancel_something()

    def create_issue(
        self,
        spec: world.ProjectSpec | None = None,
        *,
        status: str | None = None,
        requires_filesystem: bool | None = None,
        worktree: str | None = None,
    ) -> Issue:
        """A new issue, drawn at random where not given. A few filesystem issues
        name the integration checkout themselves instead of relying on the agent's
        or the project's worktree."""
        spec = spec or self.rng.choice(world.PROJECTS)
        draw = self.rng.random()
        status = status or (S.TODO if draw < 0.6 else S.BACKLOG)
        described = status == S.TODO or draw < 0.85
        if requires_filesystem is None:
            requires_filesystem = self.rng.random() < spec.filesystem_share
        if worktree is None and requires_filesystem and spec.primary_worktree:
            worktree = world.INTEGRATION_WORKTREE if self.rng.random() < 0.08 else None
        issue = projects.create_issue(
            workspace=self.workspace,
            fields={
                "project": spec.key,
                "title": world.draw_title(self.rng, spec),
                "description": self.rng.choice(world.DONE_WHEN) if described else "",
                "status": status,
                # Mostly medium and none, a few urgent: the ready queue has an order.
                "priority": self.rng.choices(PRIORITIES, weights=PRIORITY_WEIGHTS)[0],
                "requires_filesystem": requires_filesystem,
                "worktree": worktree,
            },
        )
        self.plans[issue.pk] = Plan(
            project=spec.key,
            footprint=world.draw_footprint(self.rng, spec),
            effort=self.rng.randint(1, 3),
        )
        return issue

    def groom(self) -> None:
        """Move a few backlog issues to todo, describing them first if needed."""
        backlog = self.issues(S.BACKLOG)[:8]
        for issue in self.rng.sample(backlog, min(len(backlog), 3)):
            if not issue.description:
                issue = projects.update_issue(
                    workspace=self.workspace,
                    issue=issue,
                    fields={"description": self.rng.choice(world.DONE_WHEN)},
                )
            self.move(issue.pk, S.TODO, by_human=True)

    def fix_unresolved(self) -> None:
        """An operator points an issue whose run could not resolve a worktree at the
        integration checkout, so the next run can go ahead."""
        pending, self.skipped = list(dict.fromkeys(self.skipped)), []
        for issue_id in pending:
            issue = Issue.objects.get(workspace=self.workspace, pk=issue_id)
            if issue.worktree_id is None and issue.status not in Issue.CLOSED_STATUSES:
                if self.rng.random() < 0.5:
                    projects.update_issue(
                        workspace=self.workspace,
                        issue=issue,
                        fields={"worktree": world.INTEGRATION_WORKTREE},
                    )
                else:
                    self.skipped.append(issue_id)

    def cancel_something(self) -> None:
        if self.rng.random() < 0.35:
            candidates = list(self.issues(S.BACKLOG, S.TODO)[:10])
            if candidates:
                issue = self.rng.choice(candidates)
                self.move(issue.pk, S.CANCELLED, by_human=True)
                self.post(None, f"issue:{issue.pk}", "Cancelled: no longer planned.")

    def review(self) -> None:
        for issue in list(self.issues(S.IN_REVIEW)):
            draw = self.rng.random()
            if draw < DONE_CHANCE:
                self.move(issue.pk, S.DONE, by_human=True)
            elif draw < DONE_CHANCE + BOUNCE_CHANCE:
                self.move(issue.pk, S.IN_PROGRESS, by_human=True)
                plan = self.plans[issue.pk]
                plan.progress = plan.effort - 1
                self.post(None, f"issue:{issue.pk}", "Changes requested: see the review notes.")

    # --- agents -------------------------------------------------------------------

    def work(self, worker: Worker) -> None:
        if worker.issue_id is None and not self.take_issue(worker):
            return
        self.claim_footprint(worker)
        self.dispatch(worker)

    def take_issue(self, worker: Worker) -> bool:
        """Lease an open issue, trying a second project if the first is at its cap."""
        assert worker.session_id is not None
        for key in self.preferred_projects(worker)[:2]:
            candidates = self.open_issues(key)
            if not candidates:
                continue
            issue = self.rng.choice(candidates[:4])
            try:
                leases.claim_issue(
                    workspace=self.workspace, issue_id=issue.pk, session_id=worker.session_id
                )
            except WipLimitReached:
                if self.rng.random() < 0.3:
                    self.post(worker, f"project:{key}", f"{worker.name} is waiting for a WIP slot.")
                continue
            except LeaseHeld:
                continue
            self.start_on(worker, issue)
            return True
        return False

    def preferred_projects(self, worker: Worker) -> list[str]:
        others = [spec.key for spec in world.PROJECTS if spec.key != worker.spec.profile.home]
        self.rng.shuffle(others)
        if self.rng.random() < HOME_CHANCE:
            return [worker.spec.profile.home, *others]
        return others

    def start_on(self, worker: Worker, issue: Issue) -> None:
        worker.issue_id = issue.pk
        # Assign before moving: update_issue saves the whole row it is given.
        if issue.assignee_id is None or self.rng.random() < 0.5:
            projects.update_issue(
                workspace=self.workspace, issue=issue, fields={"assignee": worker.name}
            )
        if issue.status == S.TODO:
            self.move(issue.pk, S.IN_PROGRESS, by_human=False)
            if self.rng.random() < 0.4:
                self.post(worker, f"issue:{issue.pk}", f"{worker.name} started on this.")
        else:
            self.post(worker, f"issue:{issue.pk}", f"{worker.name} picked this up to carry on.")

    def claim_footprint(self, worker: Worker) -> None:
        """Claim the issue's files; on a conflict, force it sometimes, otherwise
        take what is free and tell the holders who is waiting."""
        assert worker.issue_id is not None and worker.session_id is not None
        paths = list(self.plans[worker.issue_id].footprint)
        try:
            self.claim(worker, paths)
        except FileConflict as refused:
            if self.rng.random() < FORCE_CHANCE:
                self.claim(worker, paths, force=True)
            else:
                self.settle_for_the_rest(worker, paths, refused)

    def settle_for_the_rest(self, worker: Worker, paths: list[str], refused: FileConflict) -> None:
        """After a refusal: claim the paths nobody live held (this cannot be
        refused) and tell each holding issue who is waiting for which files."""
        contested: dict[int, list[str]] = {}
        for holder in refused.extra["conflicts"]:
            contested.setdefault(holder["issue"], []).append(holder["path"])
        taken = {path for held in contested.values() for path in held}
        free = [path for path in paths if path not in taken]
        if free:
            self.claim(worker, free)
        for holder_issue, held in sorted(contested.items()):
            self.post(
                worker,
                f"issue:{holder_issue}",
                f"{worker.name} (issue {worker.issue_id}) is waiting for {', '.join(held)}.",
            )

    def claim(self, worker: Worker, paths: list[str], *, force: bool = False) -> None:
        assert worker.issue_id is not None
        file_claims.claim_files(
            workspace=self.workspace,
            issue_id=worker.issue_id,
            paths=paths,
            session_id=worker.session_id,
            force=force,
        )

    def dispatch(self, worker: Worker) -> None:
        assert worker.issue_id is not None and worker.session_id is not None
        issue_id = worker.issue_id
        try:
            run = worktrees.dispatch_run(
                workspace=self.workspace, session_id=worker.session_id, issue_id=issue_id
            )
        except WorktreeBusy as busy:
            self.post(worker, f"issue:{issue_id}", f"Run cancelled: {busy.detail}")
            return
        except WorktreeUnresolved as unresolved:
            # The lease is gone already; hand the issue back and flag it.
            file_claims.release_files(
                workspace=self.workspace, issue_id=issue_id, session_id=worker.session_id
            )
            self.move(issue_id, S.TODO, by_human=False)
            self.post(worker, f"project:{self.plans[issue_id].project}", unresolved.detail)
            self.skipped.append(issue_id)
            worker.issue_id = None
            return
        worker.run_id = run.pk

    def wrap_up(self, worker: Worker) -> None:
        """End of the slot: finish the run, hand in finished work, maybe leave."""
        assert worker.session_id is not None
        if worker.run_id is not None:
            self.finish_run(worker, failed=self.rng.random() < FAILURE_CHANCE)
        if worker.issue_id is not None:
            plan = self.plans[worker.issue_id]
            if plan.progress >= plan.effort:
                self.hand_in(worker)
        worker.slots_left -= 1
        if worker.slots_left <= 0:
            self.leave(worker, crash=self.rng.random() < CRASH_CHANCE)

    def finish_run(self, worker: Worker, *, failed: bool) -> None:
        """Report the slot's run; a success is a step of progress on the issue."""
        assert worker.run_id is not None
        worktrees.finish_run(
            workspace=self.workspace,
            run_id=worker.run_id,
            outcome="failed" if failed else "succeeded",
        )
        worker.run_id = None
        if worker.issue_id is not None and not failed:
            self.plans[worker.issue_id].progress += 1

    def hand_in(self, worker: Worker) -> None:
        assert worker.issue_id is not None and worker.session_id is not None
        issue_id = worker.issue_id
        self.move(issue_id, S.IN_REVIEW, by_human=False)
        file_claims.release_files(
            workspace=self.workspace, issue_id=issue_id, session_id=worker.session_id
        )
        leases.release_issue(
            workspace=self.workspace, issue_id=issue_id, session_id=worker.session_id
        )
        self.post(worker, f"issue:{issue_id}", "Ready for review.")
        worker.issue_id = None

    def leave(self, worker: Worker, *, crash: bool) -> None:
        """A clean exit releases everything ``agent_ended``; a crash just stops
        heartbeating, and the next claimer reclaims what it held as ``expired``."""
        assert worker.session_id is not None
        if not crash:
            if worker.issue_id is not None:
                self.post(
                    worker,
                    f"project:{self.plans[worker.issue_id].project}",
                    f"{worker.name} is signing off; issue {worker.issue_id} is up for grabs.",
                )
            agents.end_session(workspace=self.workspace, session_id=worker.session_id)
        worker.session_id = None
        worker.issue_id = None
        worker.run_id = None

    # --- small helpers ------------------------------------------------------------

    def issues(self, *statuses: str) -> list[Issue]:
        return list(
            Issue.objects.filter(workspace=self.workspace, status__in=statuses).order_by("id")
        )

    def open_issues(self, project_key: str) -> list[Issue]:
        """Open issues of the project nobody live holds: carry-overs first (whose
        holder ended, crashed or was sent back by review), then todo, oldest first."""
        held = IssueLease.objects.live().filter(issue=OuterRef("pk"))
        rows = (
            Issue.objects.filter(
                workspace=self.workspace,
                project__key=project_key,
                status__in=(S.TODO, S.IN_PROGRESS),
            )
            .filter(~Exists(held))
            .order_by("id")
        )
        return sorted(rows, key=lambda issue: issue.status != S.IN_PROGRESS)

    def move(self, issue_id: int, to: str, *, by_human: bool) -> None:
        # Work handed in for review carries its completion report, as the rule asks.
        report = demo_report(issue_id) if to == S.IN_REVIEW else None
        workflow.transition_issue(
            workspace=self.workspace, issue_id=issue_id, to=to, by_human=by_human, report=report
        )

    def post(self, worker: Worker | None, scope: str, body: str) -> None:
        messages.post_message(
            workspace=self.workspace,
            scope=scope,
            body=body,
            session_id=worker.session_id if worker is not None else None,
        )


def demo_report(issue_id: int) -> dict[str, str]:
    return {
        "summary": f"Implemented issue {issue_id} as described.",
        "verification": "Unit tests added and the whole suite passes.",
        "pr_link": f"https://git.example.com/demo/pulls/{issue_id}",
    }
