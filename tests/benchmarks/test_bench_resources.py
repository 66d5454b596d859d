"""bench_resources runs end to end under gunicorn, prints its figures and cleans up."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from coordination.models import Resource, Workspace

pytestmark = pytest.mark.django_db(transaction=True)


def test_bench_resources_measures_cycles_waits_and_heartbeats_beside_waiters(tmp_path):
    out, report = StringIO(), tmp_path / "resources.json"
    call_command("bench_resources", "--quick", "--json", str(report), stdout=out)
    figures = json.loads(report.read_text())
    assert figures["server_error_count"] == 0, figures["server_errors"]
    assert figures["cycles"]["count"] > 0 and figures["cycles"]["per_second"] > 0
    assert figures["contention"]["wait_count"] > 0
    assert figures["heartbeats_alone"]["statuses"] == {"200": figures["heartbeats_alone"]["count"]}
    beside = figures["heartbeats_beside_waiters"]
    assert beside["count"] > 0 and set(beside["statuses"]) == {"200"}
    assert beside["waiters"] == 10
    printed = out.getvalue()
    for line in ("acquire+release, one agent", "contention (capacity 2)", "10 waiting"):
        assert line in printed
    assert not Workspace.objects.exists() and not Resource.objects.exists()
