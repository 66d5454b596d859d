"""The hook's download."""

import pytest

from tests.coordination.guard.guard_helpers import HOOK


@pytest.mark.django_db
def test_the_download_is_the_command_byte_for_byte_and_needs_no_key(client):
    """The hook is the ``projektor`` command itself: named ``pre-commit``, it runs
    ``projektor guard pre-commit``."""
    response = client.get("/guard/pre-commit")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert response.content == HOOK.read_bytes() == client.get("/agent/projektor").content
    assert response.content.startswith(b"#!/usr/bin/env python3\n")
    assert client.post("/guard/pre-commit").status_code == 405
