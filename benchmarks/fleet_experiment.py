"""The fleet experiment (``manage.py bench_fleet``): does Projektor prevent merge conflicts?

N runners (``projektor run --loop --worktrees … --integrate``) work M issues of a
generated repository (``demo.workbench``) with the scripted agent, in two conditions
over the same seed, each on a fresh database (a copy of one migrated template), a
fresh copy of the repository and its own gunicorn (``benchmarks.server``):

- *coordinated*: issues declare their paths, the runners scan and claim what the agent
  touches (``--scan``) and install the Claude Code hooks, through which the agent
  announces each edit (and obeys a refusal);
- *uncoordinated*: the same agents and the same integration, each on its own branch in
  its own worktree, no claims: issues without paths, ``--scan 0``, no hooks, edits
  unannounced. What worktree isolation alone gives.

A person (logged in to the site, the only one who may pass ``in_review → done``)
accepts each handed-in issue, so that dependencies unblock. A condition ends when every
issue is done (or at the time cap); the runners are stopped with SIGTERM, then the
server. What is measured, from the server's records, the repository and the runners'
own messages: issues done, integrations (landed on ``main``, and conflicting: a
runner's give-back naming a rebase conflict, with its files), issues whose work landed
twice (commits of the agent per issue on ``main``), wall time, issues per minute,
crashes, how long a crashed issue waited before a runner took it again and whether it
was finished, and the server's 5xx (its ``/metrics``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings as django_settings

from benchmarks import server as harness
from demo.fleet.client import PersonClient, Tally
from demo.workbench import repository
from demo.workbench.agent import TRAILER

CONDITIONS = ("coordinated", "uncoordinated")
AGENT = Path(repository.__file__).with_name("agent.py")
ROOT = Path(django_settings.BASE_DIR)
PROJECT = "WB"
WORKSPACE = "workbench"
REVIEWER = "reviewer"
NEVER_REFUSES = "100000000/min"
POLL_SECONDS = 0.5
STOP_SECONDS = 40.0  # a runner's agent gets --grace (10 s) after SIGTERM, then its give-back
GIVE_BACK = re.compile(r"projektor run: agent (?P<agent>\S+) gave issue (?P<issue>\d+) back: ")
# A rebase that cannot be made clean: at the landing, or when a claim needed a fresh base.
CONFLICTED = re.compile(r"conflict|cannot be rebased", re.IGNORECASE)
PLANNED_CRASH = "crashing as planned"  # the agent's last words, in the give-back's stderr tail
CRASHED = re.compile(r"the agent (exited with status [1-9]\d*|was killed by SIG\w+)")
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


@dataclass(frozen=True)
class Settings:
    runners: int = 4
    issues: int = 24
    seed: int = 1
    ttl: float = 8.0  # the server's session TTL: the long workers outlast it
    scan: float = 2.0  # the coordinated runners' --scan
    time_cap: float = 600.0  # per condition
    work_seconds: tuple[float, float] = (1.0, 3.0)
    crash_rate: float = 0.12


DEFAULT = Settings()
QUICK = Settings(runners=3, issues=6, ttl=6.0, time_cap=240.0, work_seconds=(0.5, 1.5))

Progress = Callable[[str], None]


# --- the databases ---------------------------------------------------------------------------


class Databases:
    """One migrated template beside the configured database, and a fresh copy of it per
    condition: a file copy on SQLite, ``CREATE DATABASE … TEMPLATE`` on PostgreSQL."""

    def __init__(self, settings_dict: dict[str, Any], where: Path) -> None:
        self.sqlite = "sqlite" in settings_dict["ENGINE"]
        self.where = where
        self.made: list[str] = []
        base = str(settings_dict["NAME"]).rsplit("/", 1)[-1] or "projektor"
        self.prefix = f"{base}_fleet_{os.getpid()}"
        self.admin: dict[str, Any] = {
            "host": settings_dict.get("HOST") or harness.HOST,
            "port": int(settings_dict.get("PORT") or 5432),
            "user": settings_dict.get("USER") or "postgres",
            "password": settings_dict.get("PASSWORD") or None,
            "dbname": "postgres",
            "autocommit": True,
        }

    def url(self, name: str) -> str:
        if self.sqlite:
            return f"sqlite:///{self.where / (name + '.sqlite3')}"
        auth = quote(self.admin["user"])
        if self.admin["password"]:
            auth += ":" + quote(self.admin["password"])
        return f"postgres://{auth}@{self.admin['host']}:{self.admin['port']}/{self.prefix}_{name}"

    def execute(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(**self.admin) as connection:
            connection.execute(statement)

    def template(self) -> None:
        if not self.sqlite:
            self.execute(f'DROP DATABASE IF EXISTS "{self.prefix}_template" WITH (FORCE)')
            self.execute(f'CREATE DATABASE "{self.prefix}_template"')
            self.made.append("template")
        migrate = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
            cwd=ROOT,
            env=harness.app_environment({"DATABASE_URL": self.url("template")}),
            capture_output=True,
            text=True,
            check=False,
        )
        if migrate.returncode != 0:
            raise RuntimeError(f"migrate failed: {migrate.stderr[-2000:]}")

    def fresh(self, name: str) -> str:
        if self.sqlite:
            shutil.copyfile(self.where / "template.sqlite3", self.where / f"{name}.sqlite3")
        else:
            self.execute(f'DROP DATABASE IF EXISTS "{self.prefix}_{name}" WITH (FORCE)')
            self.execute(
                f'CREATE DATABASE "{self.prefix}_{name}" TEMPLATE "{self.prefix}_template"'
            )
            self.made.append(name)
        return self.url(name)

    def drop(self) -> None:
        if not self.sqlite:
            for name in self.made:
                with suppress(Exception):  # noqa: BLE001 - the next run drops it again
                    self.execute(f'DROP DATABASE IF EXISTS "{self.prefix}_{name}" WITH (FORCE)')


# --- one condition -------------------------------------------------------------------------


@dataclass
class Runner:
    agent: str
    process: subprocess.Popen[bytes]
    err: Path


class Condition:
    def __init__(
        self, name: str, settings: Settings, database: str, where: Path, progress: Progress
    ) -> None:
        self.name, self.settings, self.database = name, settings, database
        self.coordinated = name == "coordinated"
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
        )
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
                started = time.monotonic()
                runners = [self.start_runner(agent, key) for agent, key in keys["agents"].items()]
                try:
                    finished = self.review_until_done(started, runners)
                finally:
                    wall = time.monotonic() - started
                    exits = self.stop_runners(runners)
                    self.person.close()
                result = self.measure(wall, finished, exits, runners)
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
            if self.coordinated:
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
        command += ["--scan", f"{s.scan:g}" if self.coordinated else "0"]
        if self.coordinated:
            command += ["--hooks", "claude-code"]
        command += ["--", sys.executable, str(AGENT), "--plan", str(self.plan_path)]
        if self.coordinated:
            command.append("--coordinated")
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("PROJEKTOR_", "GIT_", "DJANGO_")) and name != "DATABASE_URL"
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
        conflicts: list[dict[str, Any]] = []
        crashes: list[dict[str, Any]] = []
        others: list[dict[str, Any]] = []  # give-backs neither a crash nor a conflict
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
                if CRASHED.match(first_line) and PLANNED_CRASH in message["body"]:
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
            "runner_exits": exits,
            "client_5xx": sum(n for (_, status), n in self.tally.server_errors().items()),
        }

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


def crash_record(
    key: int, agent: str, message: dict[str, Any], leases: list[dict[str, Any]], status: str
) -> dict[str, Any]:
    """When the crashed work was given back, and who took it next, how much later."""
    at = parse_time(message["created_at"])
    later = [lease for lease in leases if parse_time(lease["acquired_at"]) >= at]
    taken = later[0] if later else None
    waited = (parse_time(taken["acquired_at"]) - at).total_seconds() if taken else None
    how = CRASHED.search(message["body"])
    return {
        "issue": key,
        "agent": agent,
        "how": how.group(1) if how else "",
        "taken_by": taken["agent"] if taken else None,
        "waited_seconds": round(waited, 2) if waited is not None else None,
        "finished": status == "done",
    }


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def agent_notes(runners: list[Runner]) -> dict[str, int]:
    """What the agents said of refused edits (their stderr passes through the runner's)."""
    text = "".join(runner.err.read_text(errors="replace") for runner in runners)
    return {
        "refused": text.count("workbench agent: the hook refused"),
        "moved": len(re.findall(r"workbench agent: .* instead$", text, re.MULTILINE)),
        "left": text.count("is someone else's: left alone"),
    }


def log_errors(log: Path) -> int:
    """Tracebacks in the server's log (a 5xx the metrics might not see: a worker killed)."""
    try:
        return log.read_text(errors="replace").count("Traceback (most recent call last)")
    except OSError:
        return 0


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


# --- both ------------------------------------------------------------------------------------


@contextmanager
def scratch(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    where = Path(tempfile.mkdtemp(prefix="projektor-fleet-"))
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def run(
    settings: Settings,
    settings_dict: dict[str, Any],
    progress: Progress,
    conditions: tuple[str, ...] = CONDITIONS,
    keep: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """Each condition over the same seed; ``keep``: a directory to leave everything in
    (repositories, worktrees, runner and server logs), else a temporary one."""
    results: dict[str, dict[str, Any]] = {}
    with scratch(keep) as where:
        databases = Databases(settings_dict, where)
        try:
            progress("migrating the template database")
            databases.template()
            for name in conditions:
                directory = where / name
                directory.mkdir()
                progress(f"{name}: {settings.runners} runners, {settings.issues} issues")
                condition = Condition(name, settings, databases.fresh(name), directory, progress)
                results[name] = condition.run()
        finally:
            databases.drop()
    return results


def quick_or_default(quick: bool, **overrides: Any) -> Settings:
    base = QUICK if quick else DEFAULT
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})


# --- the table -------------------------------------------------------------------------------

ROWS = [
    ("issues done", lambda r: f"{r['issues_done']}/{r['issues']}"),
    (
        "integrations (landed + conflicted)",
        lambda r: f"{r['integrations']} ({r['landed']} + {r['conflicting_integrations']})",
    ),
    (
        "conflicting integrations",
        lambda r: f"{r['conflicting_integrations']} ({r['conflict_rate']:.0%})",
    ),
    (
        "files in conflicts",
        lambda r: ", ".join(f"{p} ×{n}" for p, n in r["conflict_files"].items()) or "none",
    ),
    ("work done twice", lambda r: str(r["done_twice"])),
    ("wall time", lambda r: f"{r['wall_seconds']:.0f} s"),
    ("issues per minute", lambda r: f"{r['issues_per_minute']:.2f}"),
    ("agent crashes", lambda r: str(r["crashes"])),
    (
        "crashed issues finished",
        lambda r: (
            f"{r['crashed_taken_over']}"
            f" ({r['crashed_taken_over_by_another_runner']} by another runner)"
        ),
    ),
    (
        "crashed work waited (max)",
        lambda r: (
            "-" if r["crash_wait_seconds_max"] is None else f"{r['crash_wait_seconds_max']:.1f} s"
        ),
    ),
    (
        "edits refused at edit time",
        lambda r: f"{r['edits_refused']} ({r['edits_moved']} moved, {r['edits_left']} left)",
    ),
    (
        "runners lost (died, or hung at the stop)",
        lambda r: str(sum(1 for status in r["runner_exits"].values() if status != 0)),
    ),
    ("server 5xx", lambda r: str(r["server_errors"])),
]


def render(results: dict[str, dict[str, Any]]) -> str:
    names = [name for name in CONDITIONS if name in results]
    width = max(len(label) for label, _ in ROWS)
    cells = {name: [cell(results[name]) for _, cell in ROWS] for name in names}
    widths = {name: max(len(name), *(len(c) for c in cells[name])) for name in names}
    lines = ["| " + " | ".join([" " * width, *(name.ljust(widths[name]) for name in names)]) + " |"]
    lines.append("|" + "|".join(["-" * (width + 2), *("-" * (widths[n] + 2) for n in names)]) + "|")
    for row, (label, _) in enumerate(ROWS):
        values = [cells[name][row].ljust(widths[name]) for name in names]
        lines.append("| " + " | ".join([label.ljust(width), *values]) + " |")
    if len(names) == 2:
        coordinated, uncoordinated = (results[n]["issues_per_minute"] for n in CONDITIONS)
        ratio = coordinated / uncoordinated if uncoordinated else float("inf")
        lines.append(f"\nThroughput, coordinated ÷ uncoordinated: {ratio:.2f}")
    for name in names:
        for conflict in results[name]["conflicts"]:
            lines.append(f"{name}: issue W{conflict['issue']} conflicted: {conflict['reason']}")
    return "\n".join(lines)


def bar(results: dict[str, dict[str, Any]]) -> list[str]:
    """What the coordinated condition must show; each miss, said."""
    misses = []
    for name, result in results.items():
        if result["server_errors"] or result["client_5xx"]:
            misses.append(f"{name}: {result['server_errors']} 5xx answered")
    coordinated = results.get("coordinated")
    if coordinated is not None:
        if coordinated["conflicting_integrations"]:
            misses.append(
                f"coordinated: {coordinated['conflicting_integrations']} conflicting integrations"
            )
        if coordinated["done_twice"]:
            misses.append(f"coordinated: issues done twice {coordinated['done_twice_issues']}")
        if coordinated["crashed_taken_over"] < coordinated["crashes"]:
            misses.append("coordinated: a crashed agent's issue was not finished")
        if coordinated["issues_done"] < coordinated["issues"]:
            misses.append(f"coordinated: {coordinated['issues_done']}/{coordinated['issues']} done")
    return misses
