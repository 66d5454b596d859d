"""One condition of the experiment: its server, its runners, the person; then what it
came to (``measuring``)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx

from benchmarks import server as harness
from benchmarks.cpu import server_cpu_seconds
from benchmarks.fleet_experiment.databases import ROOT
from benchmarks.fleet_experiment.measures import Runner, log_errors, machine_ticks
from benchmarks.fleet_experiment.measuring import PROJECT, Measuring, bench_cpu_seconds, busy_share
from benchmarks.fleet_experiment.settings import Progress, Settings
from demo.fleet.client import PersonClient, Tally
from demo.workbench import check_script, repository

AGENT = Path(repository.__file__).with_name("agent.py")
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


class Condition(Measuring):
    """A condition run: its server, its runners and the person, then its measures
    (``Measuring``)."""

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
            check = f"{shlex.quote(sys.executable)} {check_script.CHECK}"
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
