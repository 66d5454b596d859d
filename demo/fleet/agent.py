"""One agent of the demo fleet, doing over HTTP what a coding agent does.

It registers a session and heartbeats it well within the TTL; takes an issue from
the ready queue (carrying on a dead holder's issue first, when there is one) by
``start_work`` or by claiming its lease; claims the issue's files (hot spots
collide: refused, it forces them now and then, else takes what is free and tells
the holders); dispatches runs and finishes them; hands the work in for review; tops
the ready queue up when it runs short (reopening a done issue that regressed, or
filing a follow-up), so the fleet can run for hours; and after a while leaves,
cleanly (``finish_work`` or ending its session) or by crashing: it stops
heartbeating and vanishes, and what it held goes stale until another agent reclaims
it after the TTL.

Each action is one step of that story and a call or a few; every refusal (409
``lease_held``, ``wip_limit_reached``, ``file_conflict``, ``worktree_busy``, 422
``worktree_unresolved`` …) is an answer the agent expects and acts on.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from demo import world
from demo.fleet.client import AgentClient, Answer
from demo.state import (
    FAILURE_CHANCE,
    FORCE_CHANCE,
    HOME_CHANCE,
    PRIORITIES,
    PRIORITY_WEIGHTS,
    demo_report,
)

if TYPE_CHECKING:
    from demo.fleet.fleet import Fleet

CARRY_ON_CHANCE = 0.8  # an idle agent picks up a dead holder's issue first
START_WORK_CHANCE = 0.5  # a fresh agent registers and takes an issue in one call
FINISH_WORK_CHANCE = 0.35  # handing in ends the session too (finish_work)
CHATTER_CHANCE = 0.04  # a message to a colleague or a project, now and then
WIP_NOTE_CHANCE = 0.3  # a WIP-refused agent says it is waiting
EFFORT = (2, 5)  # runs an issue needs
BUSY_WAIT = (5, 12)  # actions before dispatching again to a busy worktree
WIP_WAIT = (10, 25)  # actions an agent keeps off a project that refused it at its cap
REFILL_CHANCE = 0.5  # an agent that finds the ready queue short tops it up
NEW_ISSUE_CHANCE = 0.25  # topping up files a new issue rather than reopening a done one


@dataclass
class Job:
    """The issue an agent holds: its lease's fence, its files, its progress."""

    issue: int
    project: str
    fence: int | None
    paths: tuple[str, ...]
    effort: int
    claimed: bool = False
    progress: int = 0
    run: int | None = None
    waits: int = 0  # actions to wait before dispatching again (the worktree was busy)


class FleetAgent:
    """An agent's life: one session, from registration to a clean exit or a crash."""

    def __init__(self, fleet: Fleet, spec: world.AgentSpec, seed: int) -> None:
        self.fleet = fleet
        self.spec = spec
        self.rng = random.Random(seed)
        self.api = AgentClient(fleet.config.url, fleet.tally, fleet.stop, fleet.config.key)
        self.session: int | None = None
        self.job: Job | None = None
        self.actions_left = 0
        self.crashes = False
        self.capped: dict[str, int] = {}  # project -> actions to keep off it (at its WIP cap)
        self.over = False  # left or crashed: this agent's run is done
        self.thread = threading.Thread(target=self.run, name=f"demo-fleet-{spec.name}", daemon=True)

    @property
    def name(self) -> str:
        return self.spec.name

    def say(self, text: str, *, level: int = 2) -> None:
        self.fleet.say(f"{self.name:<8} {text}", level=level)

    # --- the loop -------------------------------------------------------------------

    def run(self) -> None:
        """Act every ``interval`` (jittered), heartbeat every ``beat`` seconds, until
        the agent leaves or crashes, or the fleet stops (then it leaves cleanly)."""
        config = self.fleet.config
        next_action = time.monotonic() + self.rng.uniform(0, config.interval)
        next_beat = float("inf")
        try:
            while not self.over:
                wake = min(next_action, next_beat)
                if self.fleet.stop.wait(max(0.0, wake - time.monotonic())):
                    self.leave_at_stop()
                    return
                now = time.monotonic()
                if self.session is not None and now >= next_beat:
                    self.heartbeat()
                    next_beat = now + config.beat
                if now >= next_action:
                    had_session = self.session is not None
                    self.act()
                    if self.session is not None and not had_session:
                        next_beat = time.monotonic() + config.beat
                    next_action = time.monotonic() + config.interval * self.rng.uniform(0.5, 1.5)
        finally:
            self.api.close()

    def act(self) -> None:
        if self.session is None:
            self.join()
        elif self.actions_left <= 0:
            self.leave()
        else:
            self.actions_left -= 1
            self.capped = {key: left - 1 for key, left in self.capped.items() if left > 1}
            self.work()
            if self.session is not None and self.rng.random() < CHATTER_CHANCE:
                self.chat()

    def work(self) -> None:
        job = self.job
        if job is None:
            self.find_work()
        elif not job.claimed:
            self.claim_files(job)
        elif job.run is not None:
            self.finish_run(job)
        elif job.waits > 0:
            job.waits -= 1  # the worktree was busy: give its run time to finish
        elif job.progress < job.effort:
            self.dispatch(job)
        else:
            self.hand_in(job)

    # --- a session ------------------------------------------------------------------

    def profile(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "agent": self.name,
            "role": self.spec.profile.role,
            "department": self.spec.profile.department,
        }
        if self.spec.worktree is not None:
            body["worktree"] = self.spec.worktree
        return body

    def begin(self, session: int) -> None:
        low, high = self.fleet.config.session_actions
        self.session = session
        self.actions_left = self.rng.randint(low, high)
        self.crashes = self.rng.random() < self.fleet.config.crash_chance
        self.fleet.registered(self, session)

    def join(self) -> None:
        """Register; half the time by ``start_work``, which also takes an issue and
        claims its files in one transaction (all or nothing)."""
        if self.rng.random() < START_WORK_CHANCE:
            issue = self.choose(self.ready(), carry_on=False)
            if issue is not None:
                paths = self.footprint(issue)
                body = {**self.profile(), "issue": issue["id"], "paths": list(paths)}
                answer = self.api.post("/work/start/", body)
                if answer is not None and answer.ok:
                    self.begin(int(answer.body["session"]["id"]))
                    self.job = self.new_job(issue, answer.body["lease"], paths, claimed=True)
                    self.say(f"joined and started on #{issue['id']} with {len(paths)} files")
                    return
                self.refused(f"start_work on #{issue['id']}", answer)
                return  # registers plainly next time
        answer = self.api.post("/sessions/", self.profile())
        if answer is not None and answer.status == 201:
            self.begin(int(answer.body["id"]))
            self.say(f"joined (session {self.session})")

    def heartbeat(self) -> None:
        assert self.session is not None
        answer = self.api.post(
            f"/sessions/{self.session}/heartbeat/", label="/sessions/{id}/heartbeat/"
        )
        if answer is not None and answer.status in (404, 409):
            self.say("lost its session")  # ended elsewhere: start afresh
            self.session, self.job = None, None
            self.over = True

    def leave(self) -> None:
        """The session's time is up: crash, or sign off cleanly."""
        assert self.session is not None
        self.over = True
        if self.crashes:
            held = f" holding #{self.job.issue}" if self.job is not None else ""
            self.fleet.crashed(self, self.session)
            self.say(f"crashed{held} (no more heartbeats)", level=1)
            return
        if self.job is not None and self.job.run is None and self.job.progress >= self.job.effort:
            self.finish_work(self.job)
            return
        if self.job is not None:
            self.post(
                f"project:{self.job.project}",
                f"{self.name} is signing off; issue {self.job.issue} is up for grabs.",
            )
        self.api.post(f"/sessions/{self.session}/end/", label="/sessions/{id}/end/")
        self.fleet.ended(self)
        self.say("signed off")

    def leave_at_stop(self) -> None:
        """The fleet stops: end the session (a quick call; the server may be gone)."""
        if self.session is not None and not self.over:
            self.api.post(f"/sessions/{self.session}/end/", label="/sessions/{id}/end/")
        self.over = True

    # --- taking an issue ------------------------------------------------------------

    def ready(self) -> list[dict[str, Any]]:
        """The ready queue, then the open issues nobody live holds (a dead holder's
        issue is in progress: its ``missing`` is just ``status``)."""
        answer = self.api.get("/issues/ready/?include_not_ready=true", label="/issues/ready/")
        if answer is None or not answer.ok:
            return []
        return list(answer.body["results"])

    def choose(self, issues: list[dict[str, Any]], *, carry_on: bool) -> dict[str, Any] | None:
        issues = [issue for issue in issues if issue["project"] not in self.capped]
        todo = [issue for issue in issues if issue["status"] == "todo" and not issue["missing"]]
        orphans = [
            issue
            for issue in issues
            if issue["status"] == "in_progress" and issue["missing"] == ["status"]
        ]
        if carry_on and orphans and (not todo or self.rng.random() < CARRY_ON_CHANCE):
            return self.rng.choice(orphans)  # any of them: their order says nothing
        if not todo:
            return None
        home = [issue for issue in todo if issue["project"] == self.spec.profile.home]
        if home and self.rng.random() < HOME_CHANCE:
            todo = home
        return self.rng.choice(todo[:4])  # near the head of the queue

    def find_work(self) -> None:
        assert self.session is not None
        issues = self.ready()
        workable = [  # todo in a project that did not just refuse this agent at its cap
            issue
            for issue in issues
            if issue["status"] == "todo"
            and not issue["missing"]
            and issue["project"] not in self.capped
        ]
        if len(workable) < self.fleet.config.min_ready and self.rng.random() < REFILL_CHANCE:
            self.refill()
        issue = self.choose(issues, carry_on=True)
        if issue is None:
            return
        number = issue["id"]
        answer = self.api.post(
            f"/issues/{number}/claim/", {"session": self.session}, label="/issues/{id}/claim/"
        )
        if answer is None or not answer.ok:
            if answer is not None and answer.code == "wip_limit_reached":
                self.capped[issue["project"]] = self.rng.randint(*WIP_WAIT)
                self.say(f"refused #{number}: {issue['project']} is at its WIP cap")
                if self.rng.random() < WIP_NOTE_CHANCE:
                    self.post(
                        f"project:{issue['project']}", f"{self.name} is waiting for a WIP slot."
                    )
            else:
                self.refused(f"lease of #{number}", answer)
            return
        carried = issue["status"] == "in_progress"
        paths = self.held_paths(number) if carried else ()
        self.job = self.new_job(issue, answer.body, paths or self.footprint(issue), claimed=False)
        if carried:
            was = (issue.get("lease") or {}).get("agent")
            self.fleet.carried_on(number)
            self.say(f"carries on #{number}" + (f" after {was}" if was else ""))
            self.post(f"issue:{number}", f"{self.name} picked this up to carry on.")
        else:
            self.move(number, "in_progress")
            self.say(f"took #{number} ({issue['project']}: {issue['title']})")

    def refill(self) -> None:
        """The queue runs low: in a project this agent may work in now (its own,
        unless at its cap), reopen a done issue (a regression), or now and then file
        a follow-up, while the workspace has fewer than ``max_issues``."""
        spec = world.PROJECTS_BY_KEY.get(self.spec.profile.home)
        if spec is None or spec.key in self.capped:
            open_projects = [other for other in world.PROJECTS if other.key not in self.capped]
            if not open_projects:
                return
            spec = self.rng.choice(open_projects)
        done = self.api.get(f"/issues/?status=done&project={spec.key}", label="/issues/")
        if done is None or not done.ok:
            return
        if done.body["results"] and self.rng.random() >= NEW_ISSUE_CHANCE:
            issue = self.rng.choice(done.body["results"])  # any of its latest 100
            answer = self.move(issue["id"], "todo")
            if answer is not None and answer.ok:
                self.post(f"issue:{issue['id']}", f"{self.name}: reopened, it regressed.")
                self.say(f"reopened #{issue['id']}")
                return
        total = self.api.get("/issues/", label="/issues/")
        if total is None or not total.ok or total.body["count"] >= self.fleet.config.max_issues:
            return
        body = {
            "project": spec.key,
            "title": world.draw_title(self.rng, spec),
            "description": self.rng.choice(world.DONE_WHEN),
            "status": "todo",
            "priority": self.rng.choices(PRIORITIES, weights=PRIORITY_WEIGHTS)[0],
            "requires_filesystem": self.rng.random() < spec.filesystem_share / 2,
        }
        answer = self.api.post("/issues/", body)
        if answer is not None and answer.status == 201:
            self.say(f"filed #{answer.body['id']} ({spec.key}: {body['title']})")

    def held_paths(self, issue: int) -> tuple[str, ...]:
        """The files the issue still claims (its dead holder's): carrying on, the
        agent claims the same ones."""
        answer = self.api.get(f"/file-claims/?issue={issue}&active=true", label="/file-claims/")
        if answer is None or not answer.ok:
            return ()
        return tuple(sorted({claim["path"] for claim in answer.body["results"]}))

    def footprint(self, issue: dict[str, Any]) -> tuple[str, ...]:
        spec = world.PROJECTS_BY_KEY.get(issue["project"])
        if spec is None:
            return (f"src/{issue['project']}/main.py",)
        return world.draw_footprint(self.rng, spec)

    def new_job(
        self, issue: dict[str, Any], lease: dict[str, Any], paths: tuple[str, ...], *, claimed: bool
    ) -> Job:
        return Job(
            issue=int(issue["id"]),
            project=str(issue["project"]),
            fence=lease.get("fence"),
            paths=paths,
            effort=self.rng.randint(*EFFORT),
            claimed=claimed,
        )

    # --- files, runs, handing in --------------------------------------------------------

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
            self.fleet.count("forced")
            self.say(f"forced {forced} for #{job.issue}")
        if reclaimed:
            self.fleet.reclaimed(len(reclaimed))
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
            self.fleet.unresolved(job.issue)
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
        self.fleet.handed_in()
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
            self.fleet.handed_in()
            self.fleet.ended(self)
            self.say(f"finished #{job.issue} and signed off")
            self.session, self.job, self.over = None, None, True
        else:
            self.lost(job, answer)

    # --- helpers --------------------------------------------------------------------------

    def move(self, issue: int, to: str, report: dict[str, str] | None = None) -> Answer | None:
        body: dict[str, Any] = {"to": to}
        if report is not None:
            body["report"] = report
        return self.api.post(f"/issues/{issue}/transition/", body, label="/issues/{id}/transition/")

    def release_files(self, job: Job) -> None:
        self.api.post("/file-claims/release/", {"issue": job.issue, "session": self.session})

    def post(self, scope: str, body: str) -> None:
        self.api.post("/messages/", {"scope": scope, "body": body, "session": self.session})

    def chat(self) -> None:
        colleague = self.fleet.colleague_of(self)
        if colleague is not None and self.rng.random() < 0.5:
            self.post(f"agent:{colleague}", f"{self.name}: are you still on the shared files?")
        elif self.job is not None:
            self.post(
                f"issue:{self.job.issue}",
                f"{self.name}: progress {self.job.progress}/{self.job.effort}.",
            )

    def refused(self, what: str, answer: Answer | None) -> None:
        if answer is not None:
            self.say(f"refused {what}: {answer.code or answer.status}")

    def lost(self, job: Job, answer: Answer) -> None:
        """The issue slipped away (the lease was reclaimed while this agent lagged, the
        issue moved or closed): let it go and look for other work."""
        self.say(f"lost #{job.issue}: {answer.code or answer.status}")
        self.release_files(job)
        self.job = None
