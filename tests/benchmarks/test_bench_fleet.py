"""The fleet experiment on a small run (``--quick``: every ingredient, a crash, a
dependency, a hot file shared by several issues): real runners, the scripted agent, real
git, gunicorn. Coordinated, it meets the bar: no conflicting integration, no issue done
twice, every crashed agent's issue finished by another runner, no 5xx (the uncoordinated
condition is the bench's own: it doubles the time). On SQLite scratch files, or databases
of their own beside the configured PostgreSQL one (created and dropped by the experiment)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from django.db import connection

from benchmarks import fleet_experiment as experiment
from demo.workbench.repository import Plan


def test_the_coordinated_fleet_meets_the_bar(tmp_path: Path) -> None:
    settings = replace(experiment.QUICK, issues=6)  # the ingredients, in half the time
    said: list[str] = []
    results = experiment.run(
        settings,
        dict(connection.settings_dict),
        said.append,
        conditions=("coordinated",),
        keep=tmp_path / "fleet",
    )
    coordinated = results["coordinated"]
    diagnosis = json.dumps(results, indent=1)[:6000]
    plan = Plan.load(tmp_path / "fleet" / "coordinated" / "plan.json")
    assert any(issue.blocked_by for issue in plan.issues)
    assert max(len(keys) for keys in plan.hot_sharing().values()) >= 3

    assert experiment.bar(results) == [], diagnosis
    assert coordinated["issues_done"] == settings.issues and coordinated["finished"]
    assert coordinated["issues_landed_never"] == []  # declared files are held from the start
    assert coordinated["crashes"] >= 1, diagnosis
    assert coordinated["crashed_taken_over"] == coordinated["crashes"]
    assert coordinated["crashed_taken_over_by_another_runner"] == coordinated["crashes"]
    assert all(crash["waited_seconds"] is not None for crash in coordinated["crash_details"])
    assert "| conflicting integrations" in experiment.render(results)
