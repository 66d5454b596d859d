"""bench_heatmap runs end to end on a small load and leaves nothing behind."""

import re
from io import StringIO

import pytest
from django.core.management import call_command

from coordination.models import ClaimConflict, Event, FileClaim, Workspace
from heatmap.models import RollupDay, RollupKey

pytestmark = pytest.mark.django_db


def test_bench_heatmap_prints_medians_and_ratios_and_cleans_up(workspace, make_issue):
    from tests.heatmap.conftest import T0  # noqa: PLC0415 - a claim beside the bench's
    from tests.heatmap.test_rollups import write  # noqa: PLC0415

    write(make_issue(), "claims", "src/kept.py", T0)  # not the bench's: it must stay
    out = StringIO()
    call_command(
        "bench_heatmap",
        "--rows",
        "3000",
        "--paths",
        "400",
        "--days",
        "120",
        "--repeat",
        "2",
        stdout=out,
    )
    lines = out.getvalue().splitlines()
    assert "loaded 3,000 conflicts, claims and events over 400 paths and 120 days" in lines[0]
    heatmaps = [line for line in lines if "median" in line and "nodes" in line]
    assert len(heatmaps) == 12  # two modes × (root, drill-down) × 7, 30 and 90 days
    assert all(" ms" in line and "from the rows" in line for line in heatmaps)
    pages = [line for line in lines if "median" in line and "nodes" not in line]
    for read in ("health: conflicts per day", "health: claim releases per day", "board"):
        windows = [re.search(r"(\d+) days: median", line) for line in pages if read in line]
        assert [match and match[1] for match in windows] == ["7", "30", "90"]
    # The bench's own count of the 90 days agrees with the rows'.
    ratios = [line for line in lines if "90 ÷ 7 days" in line]
    assert len(ratios) == 4 + 3
    assert list(Workspace.objects.values_list("slug", flat=True)) == [workspace.slug]
    assert not ClaimConflict.objects.exists() and not Event.objects.exists()
    assert list(FileClaim.objects.values_list("path", flat=True)) == ["src/kept.py"]
    assert list(RollupKey.objects.values_list("path", flat=True)) == ["src/kept.py"]
    assert set(RollupDay.objects.values_list("key__path", flat=True)) == {"src/kept.py"}
    assert RollupDay.objects.filter(n__gt=0).count() == 1
    # The triggers are back: a new claim is counted.
    write(make_issue(), "claims", "src/new.py", T0)
    assert RollupKey.objects.count() == 2
