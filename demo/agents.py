"""What the agents of the demo do in a slot: register, lease an issue, claim its
files, dispatch a run (holding one of the two test databases while its tests run, when
they need one), hand the work in, and leave cleanly or crash.

Refusals (a WIP cap, a contested file, a busy or unresolved worktree, both test
databases held) are the services' own, caught the way an agent would catch them.
"""

from __future__ import annotations

from coordination.errors import (
    FileConflict,
    LeaseHeld,
    ResourceBusy,
    WipLimitReached,
    WorktreeBusy,
    WorktreeUnresolved,
)
from coordination.models import Issue
from coordination.services import agents, file_claims, leases, projects, resources, runs
from demo import world
from demo.state import (
    CRASH_CHANCE,
    FAILURE_CHANCE,
    FORCE_CHANCE,
    HOME_CHANCE,
    TEST_DB_CHANCE,
    State,
    Worker,
)

S = Issue.Status


class Agents(State):
    """The agents' side of the simulation: one worker's moves at a time."""

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
            run = runs.dispatch_run(
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
        if self.tests_rng.random() < TEST_DB_CHANCE:
            self.hold_test_db(worker)

    def hold_test_db(self, worker: Worker) -> bool:
        """Take one of the test databases for the tests of the worker's issue; refused
        while both are held (the refusal is logged: ``resource.refused``), the agent runs
        its tests without one. The simulation waits in no line: time stands still in a step."""
        assert worker.session_id is not None
        try:
            resources.acquire(
                workspace=self.workspace,
                name=world.TEST_DB,
                session_id=worker.session_id,
                issue_id=worker.issue_id,
            )
        except ResourceBusy:
            return False
        worker.holds_test_db = True
        return True

    def release_test_db(self, worker: Worker) -> None:
        if worker.holds_test_db:
            assert worker.session_id is not None
            resources.release(
                workspace=self.workspace, name=world.TEST_DB, session_id=worker.session_id
            )
            worker.holds_test_db = False

    def wrap_up(self, worker: Worker) -> None:
        """End of the slot: finish the run, hand in finished work, let go of the test
        database or leave."""
        assert worker.session_id is not None
        if worker.run_id is not None:
            self.finish_run(worker, failed=self.rng.random() < FAILURE_CHANCE)
        if worker.issue_id is not None:
            plan = self.plans[worker.issue_id]
            if plan.progress >= plan.effort:
                self.hand_in(worker)
        worker.slots_left -= 1
        if worker.slots_left <= 0:
            # What it holds goes with its session: released agent_ended by a clean end,
            # left by a crash for the next that needs it to take back (expired).
            self.leave(worker, crash=self.rng.random() < CRASH_CHANCE)
        else:
            self.release_test_db(worker)  # its tests ran

    def finish_run(self, worker: Worker, *, failed: bool) -> None:
        """Report the slot's run; a success is a step of progress on the issue."""
        assert worker.run_id is not None
        runs.finish_run(
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
        worker.holds_test_db = False  # released agent_ended, or left to be taken back
