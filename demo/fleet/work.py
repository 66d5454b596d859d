"""An agent's work on the issue it holds: claiming its files (refused: forcing them
now and then, else taking the free ones and telling the holders), dispatching and
finishing runs, and handing the work in for review (``finish_work`` ends the session
too)."""

from __future__ import annotations

from typing import Any

from demo.fleet.actor import Actor, Job
from demo.fleet.client import Answer
from demo.state import FAILURE_CHANCE, FORCE_CHANCE, demo_report

FINISH_WORK_CHANCE = 0.35  # handing in ends the session too (finish_work)
BUSY_WAIT = (5, 12)  # actions before dispatching again to a busy worktree


class AtWork(Actor):
    """Files, runs, handing in."""

    def claim(self, job: Job, paths: list[str], *, force: bool = False) -> Answer | None:
        body: dict[str, Any] = {"issue": job.issue, "session": self.session, "paths": paths}
        if force:
            body["force"] = True
        if job.fence is not None:
            body["fence"] = job.fence
        return self.api.post("/file-claims/", body)

    def claim_files(self, job: Job) -> None:
        """Claim the issue's files; refused, force them now and then, else claim the
        free ones and tell each holding issue who waits for what."""
        paths = list(job.paths)
        answer = self.claim(job, paths)
        forced = ""
        if answer is not None and answer.code == "file_conflict":
            conflicts = answer.body.get("conflicts", [])
            held = ", ".join(sorted({conflict["path"] for conflict in conflicts}))
            if self.rng.random() >= FORCE_CHANCE:
                self.say(f"refused {held} for #{job.issue}")
                self.settle_for_the_rest(job, paths, conflicts)
                return
            answer, forced = self.claim(job, paths, force=True), held
        if answer is None:
            return  # no answer: try again next time
        if not answer.ok:
            self.lost(job, answer)
            return
        job.claimed = True
        reclaimed = answer.body.get("reclaimed") or []
        if forced:
            self.context.count("forced")
            self.say(f"forced {forced} for #{job.issue}")
        if reclaimed:
            self.context.count("paths reclaimed", len(reclaimed))
            self.say(f"reclaimed {', '.join(reclaimed)} from a dead holder")
        if not forced and not reclaimed:
            self.say(f"claimed {len(paths)} files for #{job.issue}")

    def settle_for_the_rest(self, job: Job, paths: list[str], conflicts: list[Any]) -> None:
        contested: dict[int, list[str]] = {}
        for holder in conflicts:
            contested.setdefault(int(holder["issue"]), []).append(str(holder["path"]))
        taken = {path for held in contested.values() for path in held}
        free = [path for path in paths if path not in taken]
        if free:
            answer = self.claim(job, free)
            if answer is not None and not answer.ok and answer.code != "file_conflict":
                self.lost(job, answer)
                return
        job.claimed = True
        for holder_issue, held in sorted(contested.items())[:2]:
            self.post(
                f"issue:{holder_issue}",
                f"{self.name} (issue {job.issue}) is waiting for {', '.join(sorted(held))}.",
            )

    def dispatch(self, job: Job) -> None:
        answer = self.api.post("/runs/", {"session": self.session, "issue": job.issue})
        if answer is None:
            return
        if answer.ok:
            job.run = int(answer.body["id"])
            self.say(f"runs #{job.issue} (run {job.run})")
        elif answer.code == "worktree_busy":
            # The run is recorded cancelled and the lease kept: retry in a while.
            holder = (answer.body.get("holder") or {}).get("agent")
            job.waits = self.rng.randint(*BUSY_WAIT)
            self.say(
                f"found the worktree busy for #{job.issue}" + (f" ({holder})" if holder else "")
            )
        elif answer.code == "worktree_unresolved":
            # The lease is gone already: park the issue in the backlog until a person
            # gives it a worktree (the reviewer does), or every agent would retry it.
            self.say(f"could not resolve a worktree for #{job.issue}: run skipped")
            self.release_files(job)
            self.move(job.issue, "todo")
            self.move(job.issue, "backlog")
            self.post(f"project:{job.project}", str(answer.body.get("detail", "")))
            self.context.unresolved.append(job.issue)
            self.job = None
        else:
            self.lost(job, answer)

    def finish_run(self, job: Job) -> None:
        assert job.run is not None
        failed = self.rng.random() < FAILURE_CHANCE
        outcome = "failed" if failed else "succeeded"
        answer = self.api.post(
            f"/runs/{job.run}/finish/", {"outcome": outcome}, label="/runs/{id}/finish/"
        )
        if answer is None:
            return
        job.run = None
        if answer.ok and not failed:
            job.progress += 1
        self.say(f"run of #{job.issue} {outcome if answer.ok else answer.code}")

    def hand_in(self, job: Job) -> None:
        """The work is done: into review with its report. Now and then that ends
        the session too (``finish_work``); else the agent releases and goes on."""
        # A session bound to crash works on until it does, holding what it holds.
        if not self.crashes and (self.actions_left <= 1 or self.rng.random() < FINISH_WORK_CHANCE):
            self.finish_work(job)
            return
        answer = self.move(job.issue, "in_review", report=demo_report(job.issue))
        if answer is None:
            return
        if not answer.ok:
            self.lost(job, answer)
            return
        self.release_files(job)
        body: dict[str, Any] = {"session": self.session}
        if job.fence is not None:
            body["fence"] = job.fence
        self.api.post(f"/issues/{job.issue}/release/", body, label="/issues/{id}/release/")
        self.post(f"issue:{job.issue}", "Ready for review.")
        self.context.count("handed in")
        self.say(f"handed #{job.issue} in for review")
        self.job = None

    def finish_work(self, job: Job) -> None:
        body: dict[str, Any] = {
            "session": self.session,
            "issue": job.issue,
            "report": demo_report(job.issue),
        }
        if job.fence is not None:
            body["fence"] = job.fence
        answer = self.api.post("/work/finish/", body)
        if answer is None:
            return
        if answer.ok:
            self.context.count("handed in")
            self.context.count("signed off")
            self.say(f"finished #{job.issue} and signed off")
            self.session, self.job, self.over = None, None, True
        else:
            self.lost(job, answer)
