"""The domain errors: each has its status and code."""

from coordination.errors import StaleFence


def test_fence_errors_are_conflicts():
    error = StaleFence(fence=1, current_fence=2)
    assert (error.status, error.code) == (409, "stale_fence")
    assert error.as_dict()["current_fence"] == 2
