"""What a condition's run came to, measured once its runners have stopped: read back
from the server (its issues, leases, messages, landings, runs and metrics), from
``main`` of the repository the runners worked and from their records (``measures``),
beside the CPU each part spent. ``condition`` runs the condition."""

from __future__ import annotations

import os
import re
import resource
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from benchmarks.fleet import percentile
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
    parse_time,
    ready_times,
    runner_cpu_seconds,
)
from benchmarks.fleet_experiment.settings import Settings
from demo.fleet.client import Tally
from demo.workbench import checks
from demo.workbench.agent import TRAILER
from demo.workbench.plan import Plan

PROJECT = "WB"  # the workbench's project on the server


class Measuring:
    """A condition's reads of the server's API and of its repository, and the figures
    they make: what ``Condition`` (``condition``) has set up by the time it measures."""

    name: str
    settings: Settings
    queue: bool  # the queue condition: its landings are read from the landing queue
    repo: Path
    base: str  # the repository's first commit
    plan: Plan
    plan_path: Path
    keys_by_id: dict[int, int]  # the plan's key of each issue, by its server id
    url: str
    api: httpx.Client
    tally: Tally  # the person's requests, by how they were answered

    def call(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        response = self.api.request(method, path, json=body)
        if response.status_code != expect:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:500]}")
        return response.json() if response.content else None

    def issues(self) -> list[dict[str, Any]]:
        return self.pages(f"/issues/?project={PROJECT}")

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
