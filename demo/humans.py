"""What the humans of the demo do: plan issues in the morning, groom the backlog,
unblock unresolved runs, cancel now and then, and review in the evening."""

from __future__ import annotations

from coordination.models import Issue
from coordination.services import projects
from demo import world
from demo.state import (
    BOUNCE_CHANCE,
    DONE_CHANCE,
    PRIORITIES,
    PRIORITY_WEIGHTS,
    Plan,
    State,
)

S = Issue.Status


class Humans(State):
    """The humans' side of the simulation: planning, grooming and review."""

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
