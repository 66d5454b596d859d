"""One percentile for every bench: nearest rank over sorted values."""

from benchmarks.fleet import percentile
from benchmarks.management.commands import bench_claims


def test_nearest_rank_and_nothing_for_no_values():
    values = [float(n) for n in range(1, 101)]  # 1 .. 100
    assert percentile(values, 0.50) == 51.0  # rank round(0.5 × 99) = 50 (0-based)
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 1.0) == 100.0
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([], 0.5) == 0.0


def test_bench_claims_uses_the_same_function():
    assert bench_claims.percentile is percentile
