"""bench_runner runs a real runner against gunicorn, prints its CPU and cleans up."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from coordination.models import Issue, Workspace

pytestmark = pytest.mark.django_db(transaction=True)


def test_bench_runner_measures_a_runner_and_the_server_beside_it(tmp_path):
    out, report = StringIO(), tmp_path / "runner.json"
    call_command("bench_runner", "--seconds", "2", "--json", str(report), stdout=out)
    figures = json.loads(report.read_text())
    for label in ("no scan", "default scan"):
        row = figures[label]
        assert row["seconds"] >= 2 and 0 <= row["runner_percent"] < 100, row
        assert row["server_percent"] >= 0
    assert figures["idle_server_percent"] >= 0
    printed = out.getvalue()
    assert "runner, no scan" in printed and "server alone (no runner)" in printed
    assert not Workspace.objects.exists() and not Issue.objects.exists()
