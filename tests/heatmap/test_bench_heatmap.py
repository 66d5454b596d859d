"""bench_heatmap runs end to end on a small load and leaves nothing behind."""

from io import StringIO

import pytest
from django.core.management import call_command

from coordination.models import ClaimConflict, FileClaim, Workspace

pytestmark = pytest.mark.django_db


def test_bench_heatmap_prints_medians_and_cleans_up():
    out = StringIO()
    call_command("bench_heatmap", "--rows", "500", "--paths", "400", "--repeat", "2", stdout=out)
    lines = out.getvalue().splitlines()
    assert "loaded 500 conflicts and 500 claims over 400 paths" in lines[0]
    medians = [line for line in lines if "median" in line]
    assert len(medians) == 4  # two modes × (root, drill-down)
    assert all(" ms " in line for line in medians)
    assert not Workspace.objects.exists()
    assert not ClaimConflict.objects.exists() and not FileClaim.objects.exists()
