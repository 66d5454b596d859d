"""What a runner costs while its agent works: ``projektor run`` on a real git repository
against gunicorn as deployed, its agent a command that only waits (``sleep``), and the
runner's own CPU (its process and the git processes it ran) over ``--seconds`` of the
agent's work, beside the server's CPU over the same time (and the server's alone first,
with no runner: its workers' own upkeep). Once at ``--scan 0`` (no scan: heartbeats and
the event follow only) and once at the default scan.

Prints the figures as a share of one core; ``--json PATH`` writes them too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from benchmarks.server import Server, environment_on_this_database, gunicorn
from coordination.models import ApiKey, Issue, Project, Workspace
from coordination.services import logs

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SETTLE_SECONDS = 5.0  # the runner starts its agent and its first scan meanwhile


def cpu_seconds(pid: int, *, children: bool = True) -> float:
    """The process's CPU time, with that of the children it has waited for (its git)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / CLOCK_TICKS


def server_seconds(server: Server) -> float:
    return sum(cpu_seconds(pid, children=False) for pid in server.worker_pids())


def repository() -> Path:
    path = Path(tempfile.mkdtemp(prefix="projektor-bench-runner-"))
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    for n in range(50):  # a small tree for the scan to look at
        (path / f"module_{n}.py").write_text(f"value = {n}\n")
    subprocess.run(["git", "-C", str(path), "add", "."], check=True)
    subprocess.run(
        ["git", "-C", str(path), "-c", "user.email=bench@example.com", "-c", "user.name=bench"]
        + ["commit", "-qm", "a tree"],
        check=True,
    )
    return path


class Command(BaseCommand):
    help = "A runner's own CPU while its agent works, beside the server's."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seconds", type=float, default=30.0)
        parser.add_argument("--json", type=Path, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.create(slug=f"bench-{uuid.uuid4().hex[:8]}", name="Bench")
        figures: dict[str, Any] = {"seconds": options["seconds"]}
        try:
            _, key = ApiKey.issue(workspace, "bench")
            project = Project.objects.create(workspace=workspace, key="core", name="Core")
            with gunicorn(env=environment_on_this_database({})) as server:
                time.sleep(SETTLE_SECONDS)
                before, started = server_seconds(server), time.monotonic()
                time.sleep(options["seconds"])
                idle = 100 * (server_seconds(server) - before) / (time.monotonic() - started)
                figures["idle_server_percent"] = round(idle, 3)
                for label, scan in (("no scan", "0"), ("default scan", None)):
                    issue = Issue.objects.create(
                        workspace=workspace,
                        project=project,
                        title=f"Work ({label})",
                        description="Done when it is measured.",
                        status=Issue.Status.TODO,
                    )
                    figures[label] = measure(server, key, issue.pk, scan, options["seconds"])
        finally:
            logs.delete_workspace(workspace)
        self.stdout.write(
            f"server alone (no runner) : {figures['idle_server_percent']:.2f} % of a core"
        )
        for label in ("no scan", "default scan"):
            row = figures[label]
            self.stdout.write(
                f"runner, {label:<12}: {row['runner_percent']:.2f} % of a core"
                f" (server beside it {row['server_percent']:.2f} %) over {row['seconds']:.0f} s"
            )
        if options["json"]:
            options["json"].write_text(json.dumps(figures, indent=2))


def measure(server: Server, key: str, issue: int, scan: str | None, seconds: float) -> dict:
    checkout = repository()
    env = {
        **os.environ,
        "PROJEKTOR_URL": f"http://{server.host}:{server.port}",
        "PROJEKTOR_API_KEY": key,
        "PROJEKTOR_AGENT": f"bench-runner-{issue}",
    }
    command = [sys.executable, "-m", "projektor_agent", "run", "--issue", str(issue)]
    command += ["--scan", scan] if scan is not None else []
    command += ["--", "sleep", str(int(seconds + SETTLE_SECONDS + 30))]
    runner = subprocess.Popen(
        command, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        time.sleep(SETTLE_SECONDS)
        started, runner_before = time.monotonic(), cpu_seconds(runner.pid)
        server_before = server_seconds(server)
        time.sleep(seconds)
        elapsed = time.monotonic() - started
        runner_cpu = cpu_seconds(runner.pid) - runner_before
        server_cpu = server_seconds(server) - server_before
    finally:
        runner.terminate()
        runner.wait(timeout=60)
    return {
        "seconds": round(elapsed, 1),
        "runner_percent": round(100 * runner_cpu / elapsed, 3),
        "server_percent": round(100 * server_cpu / elapsed, 3),
    }
