"""Fixtures of the access tests (``test_access_*.py``): ``world``, a workspace with a
row of every kind and a key of every kind (``access_helpers.build_world``)."""

from typing import Any

import pytest

from coordination.models import Workspace
from tests.coordination.api.access_helpers import World, build_world


@pytest.fixture
def world(workspace: Workspace, settings: Any) -> World:
    settings.PROJEKTOR_EVENT_STREAM_SECONDS = 0  # the stream's first frame, then its end
    return build_world(workspace)
