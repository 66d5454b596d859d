"""One condition of the experiment: its server, its runners, the person, the measures."""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import suppress
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from benchmarks import server as harness
from benchmarks.cpu import server_cpu_seconds
from benchmarks.fleet import percentile
from benchmarks.fleet_experiment.databases import ROOT
from benchmarks.fleet_experiment.measures import (
    AGENT_CHECK_FAILED,
    CHECK_FAILED,
    CONFLICTED,
    CRASHED,
    GIVE_BACK,
    PLANNED_CRASH,
    Runner,
    agent_notes,
    crash_record,
    git,
    landing_waits,
    log_errors,
    machine_ticks,
    parse_time,
    ready_times,
    runner_cpu_seconds,
)
from benchmarks.fleet_experiment.settings import Progress, Settings
from demo.fleet.client import PersonClient, Tally
from demo.workbench import checks, repository
from demo.workbench.agent import TRAILER

AGENT = Path(repository.__file__).with_name("agent.py")
PROJECT = "WB"
WORKSPACE = "workbench"
REVIEWER = "reviewer"
NEVER_REFUSES = "100000000/min"
POLL_SECONDS = 0.5
STOP_SECONDS = 40.0  # a runner's agent gets --grace (10 s) after SIGTERM, then its give-back
SEED_SCRIPT = f"""
import json, secrets, sys
import django
django.setup()
from django.contrib.auth import get_user_model
from coordination.models import Agent, ApiKey, Workspace
runners = int(sys.argv[1])
workspace = Workspace.objects.create(slug={WORKSPACE!r}, name="Workbench")
agents = {{}}
for number in range(1, runners + 1):
    agent = Agent.objects.create(workspace=workspace, name=f"runner-{{number}}")
    agents[agent.name] = ApiKey.issue(workspace, agent.name, kind="agent", agent=agent)[1]
password = secrets.token_urlsafe(18)
person = get_user_model().objects.create_user(username={REVIEWER!r}, password=password)
workspace.members.add(person)
fleet = ApiKey.issue(workspace, "bench")[1]
print(json.dumps({{"fleet": fleet, "agents": agents, "password": password}}))
"""


class Condition:
    def __init__(
        self, name: str, settings: Settings, database: str, where: Path, progress: Progress
    ) -> None:
        self.name, self.settings, self.database = name, settings, database
        # Claims: declared paths, the runners' scan and the agent CLI's hooks, one landing
        # at a time checked again after its rebase (--verify); the queue: batched landings.
        self.claims = name in ("claims", "queue")
        self.queue = name == "queue"
        self.where, self.progress = where, progress
        self.repo = where / "repo"
        self.plan_path = where / "plan.json"
        self.tally = Tally()
        self.stop = threading.Event()

    def say(self, text: str) -> None:
        self.progress(f"{self.name}: {text}")

    def run(self) -> dict[str, Any]:
        s = self.settings
        self.plan = repository.create(
            self.repo,
            s.seed,
            s.issues,
            ttl=s.ttl,
            crash_rate=s.crash_rate,
            work_seconds=s.work_seconds,
            check_seconds=s.check_seconds,
        )
        self.base = repository.base_commit(self.repo)
        keys = self.seed()
        self.agents = list(keys["agents"])
        env = harness.app_environment(
            {
                "DATABASE_URL": self.database,
                "PROJEKTOR_SESSION_TTL_SECONDS": f"{s.ttl:g}",
                "PROJEKTOR_THROTTLE_KEY": NEVER_REFUSES,
                "PROJEKTOR_THROTTLE_ANON": NEVER_REFUSES,
                "PROJEKTOR_LOG_REQUESTS": "false",
                "REDIS_URL": None,
            }
        )
        log = self.where / "gunicorn.log"
        # Two workers, many threads: every runner holds long polls (its queue, its
        # session's events) beside its calls.
        with harness.gunicorn(env=env, workers=2, threads=8 + 4 * s.runners, log_path=log) as srv:
            self.url = f"http://{srv.host}:{srv.port}"
            with httpx.Client(
                base_url=self.url + "/api/v1",
                headers={"Authorization": f"Bearer {keys['fleet']}"},
                timeout=60,
            ) as self.api:
                self.create_issues()
                self.person = PersonClient(self.url, self.tally, self.stop, WORKSPACE)
                if not self.person.log_in(REVIEWER, keys["password"]):
                    raise RuntimeError("the reviewer could not log in")
                server_before, machine_before = server_cpu_seconds(srv), machine_ticks()
                bench_before = bench_cpu_seconds()
                started = time.monotonic()
                runners = [self.start_runner(agent, key) for agent, key in keys["agents"].items()]
                try:
                    finished = self.review_until_done(started, runners)
                finally:
                    wall = time.monotonic() - started
                    # Over the same window as the wall time: from the runners' start to
                    # the last issue done (their stop is not counted).
                    cpu = self.cpu(runners, server_before, server_cpu_seconds(srv))
                    cpu["machine_busy_share"] = busy_share(machine_before, machine_ticks())
                    cpu["bench_seconds"] = round(bench_cpu_seconds() - bench_before, 2)
                    exits = self.stop_runners(runners)
                    self.person.close()
                result = self.measure(wall, finished, exits, runners)
                result["cpu"] = cpu
                result["server_errors"] = self.server_errors()
        result["server_log_errors"] = log_errors(log)
        return result

    # --- the setup ------------------------------------------------------------------------

    def seed(self) -> dict[str, Any]:
        env = harness.app_environment({"DATABASE_URL": self.database})
        seeded = subprocess.run(
            [sys.executable, "-c", SEED_SCRIPT, str(self.settings.runners)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if seeded.returncode != 0:
            raise RuntimeError(f"seeding failed: {seeded.stderr[-2000:]}")
        return dict(json.loads(seeded.stdout))

    def call(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        response = self.api.request(method, path, json=body)
        if response.status_code != expect:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:500]}")
        return response.json() if response.content else None

    def create_issues(self) -> None:
        worktree = {"slug": "primary", "name": "main", "path": str(self.repo)}
        self.call("POST", "/worktrees/", worktree, 201)
        # The runners' own (an agent key may not register one): DIR/<agent>, as they name it.
        for agent in self.agents:
            path = str(self.where / "worktrees" / agent)
            self.call("POST", "/worktrees/", {"slug": agent, "name": agent, "path": path}, 201)
        project = {
            "key": PROJECT,
            "name": "Workbench",
            "agent_wip_limit": self.settings.runners,
            "primary_worktree": "primary",
        }
        self.call("POST", "/projects/", project, 201)
        ids: dict[int, int] = {}
        for issue in self.plan.issues:
            body: dict[str, Any] = {
                "project": PROJECT,
                "title": issue.title,
                "description": issue.description,
                "status": "todo",
                "requires_filesystem": True,
            }
            if self.claims:
                body["paths"] = issue.paths
            ids[issue.key] = int(self.call("POST", "/issues/", body, 201)["id"])
        for issue in self.plan.issues:
            for blocker in issue.blocked_by:
                link = {"type": "blocks", "target": ids[issue.key]}
                self.call("POST", f"/issues/{ids[blocker]}/links/", link, 201)
        self.plan.assign(ids)
        self.plan.save(self.plan_path)
        self.keys_by_id = {server_id: key for key, server_id in ids.items()}

    def start_runner(self, agent: str, key: str) -> Runner:
        s = self.settings
        command = [sys.executable, "-m", "projektor_agent", "run", "--loop", "--project", PROJECT]
        command += ["--worktrees", str(self.where / "worktrees"), "--integrate"]
        command += ["--scan", f"{s.scan:g}" if self.claims else "0"]
        if self.claims:
            check = f"{shlex.quote(sys.executable)} {repository.CHECK}"
            command += ["--hooks", s.harness, "--verify", check]
        if self.queue:
            command += ["--queue", "--batch-max", str(s.batch_max)]
        command += ["--", sys.executable, str(AGENT), "--plan", str(self.plan_path)]
        if self.claims:
            command += ["--coordinated", "--harness", s.harness]
        else:
            command += ["--check"]  # the branch checked alone, as a pull request's CI
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("PROJEKTOR_", "GIT_", "DJANGO_", "WORKBENCH_"))
            and name != "DATABASE_URL"
        }
        env.update(
            PROJEKTOR_URL=self.url,
            PROJEKTOR_API_KEY=key,
            PROJEKTOR_AGENT=agent,
            GIT_CONFIG_NOSYSTEM="1",
            PYTHONUNBUFFERED="1",
        )
        err = self.where / f"{agent}.log"
        with err.open("wb") as output:
            process = subprocess.Popen(
                command,
                cwd=self.repo,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a ^C of the bench reaches them through us only
            )
        return Runner(agent=agent, process=process, err=err)

    # --- the run ----------------------------------------------------------------------------

    def review_until_done(self, started: float, runners: list[Runner]) -> bool:
        """The person's part: accept what is handed in, until every issue is done."""
        deadline = started + self.settings.time_cap
        told = -1
        while time.monotonic() < deadline:
            if all(runner.process.poll() is not None for runner in runners):
                self.say(f"every runner exited; see {runners[0].err.parent}/*.log")
                return False
            issues = self.issues()
            for issue in issues:
                if issue["status"] == "in_review":
                    self.person.post(
                        f"/issues/{issue['id']}/transition/",
                        {"to": "done"},
                        label="/issues/{id}/transition/",
                    )
            done = sum(issue["status"] == "done" for issue in issues)
            if done != told:
                self.say(f"{done}/{len(issues)} done after {time.monotonic() - started:.0f} s")
                told = done
            if done == len(issues):
                return True
            time.sleep(POLL_SECONDS)
        self.say(f"time cap of {self.settings.time_cap:g} s reached")
        return False

    def issues(self) -> list[dict[str, Any]]:
        return self.pages(f"/issues/?project={PROJECT}")

    def stop_runners(self, runners: list[Runner]) -> dict[str, int | None]:
        for runner in runners:
            with suppress(ProcessLookupError):
                runner.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        exits: dict[str, int | None] = {}
        for runner in runners:
            try:
                exits[runner.agent] = runner.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(runner.process.pid, signal.SIGKILL)
                runner.process.wait()
                exits[runner.agent] = None  # did not stop on SIGTERM
        return exits

    # --- the measures -----------------------------------------------------------------------

    def cpu(
        self, runners: list[Runner], server_before: float | None, server_after: float | None
    ) -> dict[str, Any]:
        """CPU seconds since the runners started: theirs (own, and their finished
        children's: the agents, the hooks those ran, git) and the server's (gunicorn's
        master and workers)."""
        own = children = 0.0
        for runner in runners:
            runner_own, runner_children = runner_cpu_seconds(runner.process.pid)
            own, children = own + runner_own, children + runner_children
        server = None
        if server_before is not None and server_after is not None:
            server = round(server_after - server_before, 2)
        return {
            "runners_seconds": round(own + children, 2),
            "runners_own_seconds": round(own, 2),
            "runner_children_seconds": round(children, 2),
            "server_seconds": server,
            "cores": os.cpu_count() or 1,
        }

    def pages(self, path: str) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = []
        page = 1
        while True:
            joiner = "&" if "?" in path else "?"
            body = self.call("GET", f"{path}{joiner}page={page}")
            results += body["results"]
            if not body.get("next"):
                return results
            page += 1

    def measure(
        self,
        wall: float,
        finished: bool,
        exits: dict[str, int | None],
        runners: list[Runner],
    ) -> dict[str, Any]:
        issues = self.issues()
        done = sum(issue["status"] == "done" for issue in issues)
        files = set(git(self.repo, "ls-tree", "-r", "--name-only", "main").split())
        landed = self.landed()
        pairs = {issue.key: issue.semantic["pair"] for issue in self.plan.issues if issue.semantic}
        conflicts: list[dict[str, Any]] = []
        crashes: list[dict[str, Any]] = []
        caught: list[dict[str, Any]] = []  # failed checks before the work landed
        others: list[dict[str, Any]] = []  # give-backs neither a crash, a conflict nor a check
        give_backs = 0
        status_of = {int(issue["id"]): issue["status"] for issue in issues}
        for issue_id, key in sorted(self.keys_by_id.items()):
            leases = sorted(self.pages(f"/leases/?issue={issue_id}"), key=lambda x: x["id"])
            for message in sorted(
                self.pages(f"/messages/?scope=issue:{issue_id}"), key=lambda m: m["id"]
            ):
                given = GIVE_BACK.search(message["body"])
                if not given:
                    continue
                give_backs += 1
                why = message["body"][given.end() :]
                first_line = why.splitlines()[0] if why else ""
                if CHECK_FAILED.search(first_line) or AGENT_CHECK_FAILED in message["body"]:
                    caught.append(
                        {"issue": key, "pair": pairs.get(key), "reason": first_line[:300]}
                    )
                elif CRASHED.match(first_line) and PLANNED_CRASH in message["body"]:
                    crashes.append(
                        crash_record(key, given["agent"], message, leases, status_of[issue_id])
                    )
                elif CONFLICTED.search(first_line):
                    named = sorted(path for path in files if path in first_line)
                    conflicts.append({"issue": key, "files": named, "reason": first_line[:300]})
                else:
                    others.append({"issue": key, "reason": first_line[:300]})
        conflict_files = Counter(path for conflict in conflicts for path in conflict["files"])
        landed_total = sum(landed.values())
        integrations = landed_total + len(conflicts)
        notes = agent_notes(runners)
        waits = [c["waited_seconds"] for c in crashes if c["waited_seconds"] is not None]
        red = checks.red_commits(self.repo, self.base)
        landings = self.landings() if self.queue else []
        landed_at = self.landed_at(landings)
        wait_by_key = landing_waits(ready_times(self.plan_path), landed_at)
        landing_wait = sorted(wait_by_key.values())
        queued = sorted(
            (parse_time(e["finished_at"]) - parse_time(e["queued_at"])).total_seconds()
            for e in landings
            if e.get("state") == "landed" and e.get("finished_at") and e.get("queued_at")
        )
        return {
            "condition": self.name,
            "settings": {**asdict(self.settings), "work_seconds": list(self.settings.work_seconds)},
            "issues": len(issues),
            "issues_done": done,
            "finished": finished,
            "wall_seconds": round(wall, 1),
            "issues_per_minute": round(done / (wall / 60), 2) if wall > 0 else 0.0,
            "integrations": integrations,
            "landed": landed_total,
            "conflicting_integrations": len(conflicts),
            "conflict_rate": round(len(conflicts) / integrations, 3) if integrations else 0.0,
            "conflict_files": dict(conflict_files.most_common()),
            "conflicts": conflicts,
            "red_landings": len(red),
            # The red commits that broke something (the others landed on a broken main).
            "red_breaking": sum(1 for commit in red if commit["new"]),
            "red_commits": [
                {
                    "commit": commit["commit"][:12],
                    "subject": commit["subject"],
                    "failures": commit["failures"][:3],
                    "new": commit["new"][:3],
                }
                for commit in red
            ],
            "semantic_pairs": len(set(pairs.values())),
            "semantic_conflicts_caught": len(caught),
            "checks_failed": caught,
            "landing_wait_p50_seconds": round(percentile(landing_wait, 0.50), 1),
            "landing_wait_p95_seconds": round(percentile(landing_wait, 0.95), 1),
            "landing_waits_measured": len(landing_wait),
            "queue_wait_p95_seconds": round(percentile(queued, 0.95), 1) if queued else None,
            "queue_rejections": dict(
                Counter(str(e.get("reason")) for e in landings if e.get("state") == "rejected")
            ),
            "queue_batches": len({e.get("fence") for e in landings if e.get("fence")}),
            "done_twice": sum(1 for count in landed.values() if count > 1),
            "done_twice_issues": sorted(key for key, count in landed.items() if count > 1),
            "issues_landed_never": sorted(
                issue.key for issue in self.plan.issues if landed.get(issue.key, 0) == 0
            ),
            "give_backs": give_backs,
            "other_give_backs": others,
            "crashes": len(crashes),
            "crashed_taken_over": sum(1 for c in crashes if c["finished"]),
            "crashed_taken_over_by_another_runner": sum(
                1 for c in crashes if c["finished"] and c["taken_by"] not in (None, c["agent"])
            ),
            "crash_wait_seconds_max": round(max(waits), 1) if waits else None,
            "crash_wait_seconds_mean": round(sum(waits) / len(waits), 1) if waits else None,
            "crash_details": crashes,
            "edits_refused": notes["refused"],
            "edits_moved": notes["moved"],
            "edits_left": notes["left"],
            "starts_refused": notes["starts_refused"],
            "landing_waits": notes["landing_waits"],
            "runner_exits": exits,
            "client_5xx": sum(n for (_, status), n in self.tally.server_errors().items()),
        }

    def landings(self) -> list[dict[str, Any]]:
        """The project's landing queue, every entry (the queue condition's)."""
        return self.pages(f"/landings/?project={PROJECT}")

    def landed_at(self, landings: list[dict[str, Any]]) -> dict[int, float]:
        """When each issue's work landed (seconds since the epoch): its landing entry's
        end in the queue, else the end of its integration run on the primary worktree."""
        at: dict[int, float] = {}
        for entry in landings:
            key = self.keys_by_id.get(int(entry["issue"]))
            if key is not None and entry.get("state") == "landed" and entry.get("finished_at"):
                at[key] = parse_time(entry["finished_at"]).timestamp()
        if at:
            return at
        for issue_id, key in self.keys_by_id.items():
            for run in self.pages(f"/runs/?issue={issue_id}"):
                if (
                    run.get("worktree") == "primary"
                    and run.get("status") == "succeeded"
                    and run.get("finished_at")
                ):
                    moment = parse_time(run["finished_at"]).timestamp()
                    at[key] = max(at.get(key, 0.0), moment)
        return at

    def landed(self) -> Counter[int]:
        """The agent's commits on main, per issue key: more than one is work done twice."""
        log = git(self.repo, "log", "main", f"--format=%(trailers:key={TRAILER},valueonly)")
        return Counter(int(line) for line in log.split() if line.strip().isdigit())

    def server_errors(self) -> int:
        """Every 5xx the server answered, from its /metrics (all workers summed)."""
        text = httpx.get(self.url + "/metrics", timeout=30).text
        total = 0
        for line in text.splitlines():
            match = re.match(r'projektor_http_requests_total\{.*status="5\d\d".*\} (\S+)', line)
            if match:
                total += int(float(match.group(1)))
        return total


def bench_cpu_seconds() -> float:
    """This process's CPU, every thread: the person polling and accepting."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """The machine's busy share of all its cores between two ``machine_ticks``."""
    total = after[1] - before[1]
    return round((after[0] - before[0]) / total, 3) if total > 0 else None
