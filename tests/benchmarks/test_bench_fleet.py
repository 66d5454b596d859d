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


def test_the_scaling_run_measures_each_count(tmp_path: Path) -> None:
    """``--scaling 1,2`` on a tiny plan: each count's figures are there (no timing asserted)."""
    settings = replace(experiment.QUICK, issues=4)
    results = experiment.run_scaling(
        settings, [1, 2], dict(connection.settings_dict), lambda _: None, tmp_path / "scale"
    )
    json.dumps(results)  # what --json writes
    diagnosis = json.dumps(results["scaling"], indent=1)
    assert [row["runners"] for row in results["scaling"]] == [1, 2]
    assert set(results["runs"]) == {"1", "2"}
    path = results["plan"]["critical_path"]
    assert path["seconds"] > 0 and path["chain"] and path["links"] >= 1
    for row in results["scaling"]:
        assert row["issues"] == 4 and row["issues_done"] == 4, diagnosis
        for key in (
            "wall_seconds",
            "issues_per_minute",
            "speedup",
            "runners_cpu_seconds",
            "runners_own_cpu_seconds",
            "runner_children_cpu_seconds",
            "server_cpu_seconds",
            "runners_cpu_per_issue",
            "server_cpu_per_issue",
            "machine_busy_share",
            "critical_path_seconds",
            "critical_path_share",
            "starts_refused",
            "landing_waits",
        ):
            assert row[key] is not None, (key, diagnosis)
        assert row["runners_cpu_seconds"] > 0 and row["server_cpu_seconds"] > 0, diagnosis
        assert 0 < row["machine_busy_share"] <= 1, diagnosis
    assert results["scaling"][0]["speedup"] == 1.0
    assert experiment.scaling.misses(results) == [], json.dumps(results["runs"], indent=1)[:6000]
    assert "| runners" in experiment.scaling.render(results)
