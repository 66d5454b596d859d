"""The fleet experiment (``manage.py bench_fleet``): does Projektor prevent merge conflicts,
and does the default branch stay green?

N runners (``projektor run --loop --worktrees … --integrate``) work M issues of a
generated repository (``demo.workbench``: its check, ``check.py``, sleeps
``--check-seconds`` then imports every module and runs its checks; its plan has hot
files, ``blocks`` links, crashes and *semantic pairs*, two issues in different files
that pass the check alone and fail it together) with the scripted agent, in three
conditions over the same seed, each on a fresh database (a copy of one migrated
template), a fresh copy of the repository and its own gunicorn (``benchmarks.server``):

- *uncoordinated*: no claims (issues without paths, ``--scan 0``, no hooks, edits
  unannounced), each branch checked alone before it lands, as a pull request's CI does
  (the agent runs the check in its worktree and fails when its work broke it); the
  runner lands without checking again after its rebase. What worktree isolation and CI
  on each branch give;
- *claims*: issues declare their paths, the runners scan and claim what the agent
  touches (``--scan``) and install the edit-time hooks of one agent CLI (``--harness``:
  Claude Code by default, or Codex, Gemini CLI, Cursor, Copilot CLI), through which the
  agent announces each edit in that CLI's words (and obeys a refusal said its way); one
  landing at a time, checked again after its rebase (``--verify "python check.py"``);
- *queue*: claims, and the server's landing queue (``--queue --batch-max N``): testers
  check batches of non-overlapping entries applied in order on ``main``, land green
  ones, bisect red ones and hand the culprit back.

A person (logged in to the site, the only one who may pass ``in_review → done``)
accepts each handed-in issue, so that dependencies unblock. A condition ends when every
issue is done (or at the time cap); the runners are stopped with SIGTERM, then the
server. What is measured, from the server's records, the repository and the runners'
own messages: issues done, integrations (landed on ``main``, and conflicting: a
runner's give-back naming a rebase conflict, with its files), red landings (every
commit the run put on ``main`` checked out and checked, at 0 seconds), semantic
conflicts caught (give-backs whose reason is a failed check), the landing wait (from
the agent's exit to its work's landing: its integration run's end, or its landing
entry's), issues whose work landed twice (commits of the agent per issue on ``main``),
wall time, issues per minute, crashes, how long a crashed issue waited before a runner
took it again and whether it was finished, and the server's 5xx (its ``/metrics``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.fleet_experiment import scaling
from benchmarks.fleet_experiment.condition import Condition
from benchmarks.fleet_experiment.databases import Databases
from benchmarks.fleet_experiment.report import bar, render
from benchmarks.fleet_experiment.settings import CONDITIONS, DEFAULT, QUICK, Progress, Settings

__all__ = [
    "CONDITIONS",
    "DEFAULT",
    "QUICK",
    "Settings",
    "bar",
    "quick_or_default",
    "render",
    "run",
    "run_scaling",
    "scaling",
]


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


def run_scaling(
    settings: Settings,
    counts: list[int],
    settings_dict: dict[str, Any],
    progress: Progress,
    keep: Path | None = None,
    conditions: tuple[str, ...] = scaling.SCALED,
) -> dict[str, Any]:
    """Each of ``conditions`` (claims and queue) at each runner count in ``counts``,
    over one plan of ``settings.issues`` issues (``scaling.plan_issues`` gives a wide
    enough one)."""
    with scratch(keep) as where:
        databases = Databases(settings_dict, where)
        try:
            progress("migrating the template database")
            databases.template()
            return scaling.run(settings, counts, databases, where, progress, conditions)
        finally:
            databases.drop()


def quick_or_default(quick: bool, **overrides: Any) -> Settings:
    base = QUICK if quick else DEFAULT
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})
