"""A fleet of agents against the app under gunicorn, with the database's ceiling beside it.

Starts gunicorn on a free loopback port against the configured database, prepares a
throw-away workspace, and drives it from separate client processes (one kept-alive
HTTP connection and one live session each) through the scenarios; then issues the
same transactions straight to the database from as many processes. Prints ops/s,
latency percentiles, statuses and statements per op beside the direct figures, the
cost of the rate-limit counter, growth with a large history and one agent alone; the
server's CPU per request of each API run and of the reference calls (one worker, one
thread, one client: ``/healthz``, a heartbeat, claiming ten paths and releasing them).
``--profile DIR`` writes a pyinstrument profile of the workers under each run.
Any 5xx, connection error or unexpected answer fails the command (after the table).
The logic lives in ``benchmarks``; ``suite`` says in which order.
"""

import json
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmarks import report, runs, server, suite
from benchmarks.load import Volumes


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


def positive_float(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise ValueError(value)
    return number


class Command(BaseCommand):
    help = "Benchmark a fleet of agents over HTTP (gunicorn), beside the database's ceiling."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--agents",
            type=positive_int,
            help=f"client processes (default {suite.DEFAULT_AGENTS})",
        )
        parser.add_argument(
            "--seconds",
            type=positive_float,
            help=f"per run (default {suite.DEFAULT_SECONDS:g})",
        )
        parser.add_argument(
            "--workers",
            type=positive_int,
            default=server.DEFAULT_WORKERS,
            help=f"gunicorn workers (default 2 × cores + 1 = {server.DEFAULT_WORKERS})",
        )
        parser.add_argument(
            "--threads",
            type=positive_int,
            default=server.DEFAULT_THREADS,
            help=f"threads per gunicorn worker (default {server.DEFAULT_THREADS})",
        )
        parser.add_argument(
            "--scenarios",
            default=",".join(suite.CHOICES),
            help=f"comma-separated subset of: {', '.join(suite.CHOICES)}",
        )
        parser.add_argument(
            "--quick",
            action="store_true",
            help=f"{suite.QUICK_SECONDS:g} s runs, {suite.QUICK_AGENTS} agents, volumes ÷100",
        )
        parser.add_argument("--json", type=Path, help="also write every figure to this file")
        parser.add_argument(
            "--profile",
            type=Path,
            metavar="DIR",
            help="write a pyinstrument profile of each gunicorn worker under each API run"
            " and reference call to DIR (<run>.worker-<pid>.html)",
        )

    started = 0.0  # time.monotonic() when the command began

    def progress(self, message: str) -> None:
        elapsed = time.monotonic() - self.started
        self.stderr.write(f"[{elapsed:6.1f} s] {message}", style_func=lambda text: text)

    def handle(self, *args: Any, **options: Any) -> None:
        self.started = time.monotonic()
        selected = tuple(name.strip() for name in options["scenarios"].split(",") if name.strip())
        unknown = sorted(set(selected) - set(suite.CHOICES))
        if unknown or not selected:
            raise CommandError(f"Unknown scenarios {unknown}; choose from {list(suite.CHOICES)}")
        quick = options["quick"]
        profile_dir = options["profile"]
        if profile_dir:
            profile_dir = profile_dir.resolve()
            profile_dir.mkdir(parents=True, exist_ok=True)
        volumes = Volumes()
        bench_options = runs.BenchOptions(
            agents=options["agents"] or (suite.QUICK_AGENTS if quick else suite.DEFAULT_AGENTS),
            seconds=options["seconds"] or (suite.QUICK_SECONDS if quick else suite.DEFAULT_SECONDS),
            workers=options["workers"],
            threads=options["threads"],
            selected=selected,
            quick=quick,
            volumes=volumes.scaled_down(suite.QUICK_DIVISOR) if quick else volumes,
            profile_dir=profile_dir,
        )
        try:
            result = suite.Bench(bench_options, progress=self.progress).run()
        except server.ServerFailed as error:
            raise CommandError(str(error)) from None
        self.stdout.write(report.render(result))
        if options["json"]:
            options["json"].write_text(json.dumps(report.as_json(result), indent=2) + "\n")
            self.progress(f"Wrote {options['json']}")
        if result.failures:
            raise CommandError(f"{len(result.failures)} failures (listed above)")
