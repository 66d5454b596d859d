"""The bench's table: every throughput figure with a direct ceiling is printed beside
its ratio to that ceiling (API÷direct)."""

import os
import platform
import sys
from collections import Counter

from benchmarks.environment import interpreter
from benchmarks.fleet import Latency, RunFigures
from benchmarks.report import BenchReport, GrowthReport, ScenarioReport, render


def figures(mode: str, ops: int, scenario: str = "files") -> RunFigures:
    run = RunFigures(scenario=scenario, mode=mode, agents=2, seconds=10.0, ops=ops)
    run.op_latency = Latency.of([0.01] * ops)
    run.outcomes = {"claim": Counter({"201": ops})}
    return run


def test_every_figure_with_a_ceiling_is_printed_beside_its_ratio_to_it():
    files = ScenarioReport(
        name="files",
        scenario="files",
        api=figures("api", 100),
        direct=figures("direct", 400),
        statements_per_op=14,
    )
    heartbeat = ScenarioReport(
        name="heartbeat",
        scenario="heartbeat",
        api=figures("api", 300, "heartbeat"),
        direct=figures("direct", 1000, "heartbeat"),
        statements_per_op=3,
    )
    report = BenchReport(
        config={"database": "sqlite", "workers": 1, "threads": 1, "cpu_count": 2, "seconds": 10},
        scenarios=[heartbeat, files],
        throttle_off={"heartbeat": figures("api", 500, "heartbeat")},
        growth=[
            GrowthReport(
                "history", "+ history", figures("api", 80), 0.8, direct=figures("direct", 200)
            )
        ],
    )

    table = render(report)

    heartbeat_row = next(line for line in table.splitlines() if line.startswith("heartbeat"))
    assert heartbeat_row.split()[-2:] == ["100", "0.30"]  # direct ops/s, API÷direct
    files_row = next(line for line in table.splitlines() if line.startswith("files"))
    assert files_row.split()[-2:] == ["40", "0.25"]
    throttle = next(line for line in table.splitlines() if line.startswith("  heartbeat"))
    assert "on      30 ops/s (÷direct 0.30)" in throttle
    assert "off      50 ops/s (÷direct 0.50)" in throttle
    growth = next(line for line in table.splitlines() if line.startswith("  + history"))
    assert "×0.80  direct 20 ops/s, API÷direct 0.40" in growth


def test_the_header_names_the_interpreter_the_server_ran_on():
    """Two builds of one Python version differ by up to a fifth in CPU per request: the
    report says which one served (the venv's python, resolved to its file)."""
    python = interpreter()
    assert python.startswith(f"Python {platform.python_version()} (")
    assert os.path.realpath(sys.executable) in python
    config = {"database": "sqlite", "workers": 1, "threads": 1, "cpu_count": 2, "seconds": 10}

    named = render(BenchReport(config={**config, "python": python})).splitlines()[0]
    unnamed = render(BenchReport(config=config)).splitlines()[0]

    assert named.endswith(f", {python}")
    assert "Python" not in unnamed


def test_a_reference_call_is_judged_on_its_figure_as_reported():
    """0.40003 ms is reported as 0.4 against a target of 0.4: met, as a reader reads it."""
    from benchmarks.reference import ReferenceCall

    def call(cpu_ms: float) -> ReferenceCall:
        return ReferenceCall("healthz", 100, cpu_ms, wall_ms=1.0, target_ms=0.4)

    assert call(0.40003).met is True
    assert call(0.4001).met is False
