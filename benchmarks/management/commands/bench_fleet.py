"""The fleet experiment: merge conflicts and red landings (``benchmarks.fleet_experiment``)

    python manage.py bench_fleet [--runners N] [--issues M] [--seed S] [--quick] [--json PATH]
                                 [--check-seconds S] [--batch-max N]
                                 [--condition uncoordinated|claims|queue ...]
                                 [--harness claude-code|codex|gemini|cursor|copilot]
                                 [--scaling 1,4,8,16]

Runs N runners with the workbench's scripted agent over M issues of a generated
repository whose check takes ``--check-seconds``, in three conditions: uncoordinated
(no claims, each branch checked alone before it lands, as a pull request's CI),
claims (the agent speaking to the edit-time hooks of the agent CLI ``--harness``,
Claude Code's by default; one landing at a time, checked again after its rebase) and
queue (claims, and the landing queue's batches of up to ``--batch-max``), each on a
fresh database beside the one configured (DATABASE_URL: a PostgreSQL server, else
scratch SQLite files) and its own gunicorn; prints them side by side, and fails when
the bar is missed: claims or queue with a conflicting integration, a red landing, a
crashed agent's issue left unfinished or finished by that agent's own runner, an issue
not done; uncoordinated without a red landing (nothing shown); the queue under 1.5 ×
the claims condition's issues per minute at 6 runners or more with a check of 10 s or
more; in any condition work done twice, a runner lost or a 5xx answered.

``--scaling 1,4,8,16``: the claims and queue conditions (``--condition`` chooses) at each
runner count, over one plan of max(M, 4 × the largest count) issues (M when ``--issues``
is given), with a check of 0 seconds unless ``--check-seconds`` says otherwise; prints
per condition and count issues per minute, the speed-up over its fewest runners, the
runners', server's and machine's CPU, issues per core-minute and the plan's critical
path (``--json``: a ``scaling`` list, and ``runs`` by condition and count), and fails
when a count misses the coordinated bar (a crash finished by its own runner is no miss
with one runner). Throughput that falls as runners are added is said, not failed.
"""

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from benchmarks import fleet_experiment as experiment
from benchmarks import server
from benchmarks.management.commands.bench import positive_float, positive_int
from demo.workbench import speech


def seconds(value: str) -> float:
    number = float(value)
    if number < 0:
        raise ValueError(value)
    return number


def runner_counts(text: str) -> list[int]:
    """``1,4,8,16``: distinct positive counts, in increasing order."""
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of runner counts: {text!r}") from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"runner counts must be positive: {text!r}")
    return counts


class Command(BaseCommand):
    help = (
        "The fleet experiment: merge conflicts and red landings among runners, uncoordinated, "
        "with claims, and with the landing queue."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        default, quick = experiment.DEFAULT, experiment.QUICK
        parser.add_argument(
            "--runners",
            type=positive_int,
            help=f"runner processes (default {default.runners}; --quick {quick.runners})",
        )
        parser.add_argument(
            "--issues",
            type=positive_int,
            help=f"issues in the plan (default {default.issues}; --quick {quick.issues})",
        )
        parser.add_argument("--seed", type=int, help=f"the plan's seed (default {default.seed})")
        parser.add_argument(
            "--ttl",
            type=positive_float,
            help=f"the server's session TTL in seconds (default {default.ttl:g})",
        )
        parser.add_argument(
            "--time-cap",
            type=positive_float,
            help=f"seconds per condition at most (default {default.time_cap:g})",
        )
        parser.add_argument(
            "--condition",
            choices=experiment.CONDITIONS,
            action="append",
            help="run only this condition (repeatable; default all three, with --scaling "
            "claims and queue)",
        )
        parser.add_argument(
            "--check-seconds",
            type=seconds,
            help="how long the repository's check sleeps before it imports and checks "
            f"(default {default.check_seconds:g}; --quick {quick.check_seconds:g}; "
            "--scaling 0)",
        )
        parser.add_argument(
            "--batch-max",
            type=positive_int,
            help=f"the queue condition's --batch-max (default {default.batch_max})",
        )
        parser.add_argument(
            "--harness",
            choices=speech.HARNESSES,
            help="the agent CLI whose hooks the claiming agents speak to "
            f"(default {default.harness})",
        )
        parser.add_argument(
            "--quick", action="store_true", help="small, with every ingredient (for CI)"
        )
        parser.add_argument(
            "--scaling",
            type=runner_counts,
            metavar="N,N,...",
            help="the claims and queue conditions at each runner count, on a plan wide "
            "enough for the largest (4 issues per runner at least)",
        )
        parser.add_argument("--json", type=Path, help="also write the figures to this file")
        parser.add_argument(
            "--keep",
            type=Path,
            metavar="DIR",
            help="leave the repositories, worktrees and logs in DIR (else a temporary one)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.monotonic()

        def progress(message: str) -> None:
            elapsed = time.monotonic() - started
            self.stderr.write(f"[{elapsed:6.1f} s] {message}", style_func=lambda text: text)

        settings = experiment.quick_or_default(
            options["quick"],
            runners=options["runners"],
            issues=options["issues"],
            seed=options["seed"],
            ttl=options["ttl"],
            time_cap=options["time_cap"],
            harness=options["harness"],
            check_seconds=options["check_seconds"],
            batch_max=options["batch_max"],
        )
        if options["scaling"]:
            if options["check_seconds"] is None:  # the runners measured, not the check
                settings = replace(settings, check_seconds=0.0)
            self.scaling(settings, options, progress)
            return
        conditions = tuple(
            name
            for name in experiment.CONDITIONS
            if name in (options["condition"] or experiment.CONDITIONS)
        )
        try:
            results = experiment.run(
                settings, dict(connection.settings_dict), progress, conditions, options["keep"]
            )
        except server.ServerFailed as error:
            raise CommandError(str(error)) from None
        self.stdout.write(experiment.render(results))
        if options["json"]:
            options["json"].write_text(json.dumps(results, indent=2) + "\n")
            progress(f"Wrote {options['json']}")
        misses = experiment.bar(results)
        if misses:
            raise CommandError("The bar is missed: " + "; ".join(misses))

    def scaling(
        self, settings: experiment.Settings, options: dict[str, Any], progress: Any
    ) -> None:
        counts = options["scaling"]
        issues = options["issues"] or experiment.scaling.plan_issues(settings, counts)
        settings = replace(settings, issues=issues)
        chosen = options["condition"] or experiment.scaling.SCALED
        conditions = tuple(name for name in experiment.CONDITIONS if name in chosen)
        try:
            results = experiment.run_scaling(
                settings,
                counts,
                dict(connection.settings_dict),
                progress,
                options["keep"],
                conditions,
            )
        except server.ServerFailed as error:
            raise CommandError(str(error)) from None
        self.stdout.write(experiment.scaling.render(results))
        if options["json"]:
            options["json"].write_text(json.dumps(results, indent=2) + "\n")
            progress(f"Wrote {options['json']}")
        misses = experiment.scaling.misses(results)
        if misses:
            raise CommandError("The bar is missed: " + "; ".join(misses))
