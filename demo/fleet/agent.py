"""One agent of the demo fleet, doing over HTTP what a coding agent does.

It registers a session and heartbeats it well within the TTL; takes an issue from
the ready queue (carrying on a dead holder's issue first, when there is one) by
``start_work`` or by claiming its lease; claims the issue's files (hot spots
collide: refused, it forces them now and then, else takes what is free and tells
the holders); dispatches runs and finishes them; hands the work in for review; tops
the ready queue up when it runs short (reopening a done issue that regressed, or
filing a follow-up), so the fleet can run for hours; now and then gets stuck (as at a
permission prompt): it keeps heartbeating and holding what it holds but makes no
progress for a while, so the server shows it stalled; and after a while leaves,
cleanly (``finish_work`` or ending its session) or by crashing: it stops
heartbeating and vanishes, and what it held goes stale until another agent reclaims
it after the TTL.

Each action is one step of that story and a call or a few; every refusal (409
``lease_held``, ``wip_limit_reached``, ``file_conflict``, ``worktree_busy``, 422
``worktree_unresolved`` …) is an answer the agent expects and acts on.
"""

from __future__ import annotations

import time
from typing import Any

from demo import world
from demo.fleet.actor import Job
from demo.fleet.work import AtWork
from demo.state import HOME_CHANCE, PRIORITIES, PRIORITY_WEIGHTS

CARRY_ON_CHANCE = 0.8  # an idle agent picks up a dead holder's issue first
START_WORK_CHANCE = 0.5  # a fresh agent registers and takes an issue in one call
CHATTER_CHANCE = 0.04  # a message to a colleague or a project, now and then
WIP_NOTE_CHANCE = 0.3  # a WIP-refused agent says it is waiting
EFFORT = (2, 5)  # runs an issue needs
WIP_WAIT = (10, 25)  # actions an agent keeps off a project that refused it at its cap
REFILL_CHANCE = 0.5  # an agent that finds the ready queue short tops it up
NEW_ISSUE_CHANCE = 0.25  # topping up files a new issue rather than reopening a done one


class FleetAgent(AtWork):
    """An agent's life: one session, from registration to a clean exit or a crash."""

    # --- the loop -------------------------------------------------------------------

    def run(self) -> None:
        """Act every ``interval`` (jittered), heartbeat every ``beat`` seconds, until
        the agent leaves or crashes, or the fleet stops (then it leaves cleanly)."""
        config = self.context.config
        next_action = time.monotonic() + self.rng.uniform(0, config.interval)
        next_beat = float("inf")
        try:
            while not self.over:
                wake = min(next_action, next_beat)
                if self.context.stop.wait(max(0.0, wake - time.monotonic())):
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
        elif self.stuck():
            return  # heartbeats go on (``run``); no call that would be progress
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

    def stuck(self) -> bool:
        """Sitting out an action while stuck; getting stuck when its time comes."""
        if self.stuck_for > 0:
            self.stuck_for -= 1
            if self.stuck_for == 0:
                self.say("unstuck: carries on", level=1)
            return True
        if self.stuck_at is not None and self.actions_left <= self.stuck_at:
            self.stuck_at = None
            self.stuck_for = self.rng.randint(*self.context.config.stuck_actions)
            assert self.session is not None
            self.context.stuck(self.session)
            self.say("stuck: heartbeats, but no progress for a while", level=1)
            return True
        return False

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
        low, high = self.context.config.session_actions
        self.session = session
        self.actions_left = self.rng.randint(low, high)
        self.crashes = self.rng.random() < self.context.config.crash_chance
        if self.rng.random() < self.context.config.stall_chance:
            self.stuck_at = self.rng.randint(1, self.actions_left)
        self.context.registered(session)

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
            self.context.crashed(self.session)
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
        self.context.count("signed off")
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
        if len(workable) < self.context.config.min_ready and self.rng.random() < REFILL_CHANCE:
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
            self.context.count("carried on")
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
        if total is None or not total.ok or total.body["count"] >= self.context.config.max_issues:
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

    def chat(self) -> None:
        colleague = self.context.colleague_of(self.name, self.rng)
        if colleague is not None and self.rng.random() < 0.5:
            self.post(f"agent:{colleague}", f"{self.name}: are you still on the shared files?")
        elif self.job is not None:
            self.post(
                f"issue:{self.job.issue}",
                f"{self.name}: progress {self.job.progress}/{self.job.effort}.",
            )
