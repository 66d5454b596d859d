"""The hook's download."""

from pathlib import Path

import pytest

from projektor_agent import guard as pre_commit

HOOK = Path(pre_commit.__file__)


@pytest.mark.django_db
def test_the_download_is_the_script_byte_for_byte_and_needs_no_key(client):
    response = client.get("/guard/pre-commit")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content == HOOK.read_bytes()
    assert response.content.startswith(b"#!/usr/bin/env python3\n")
    assert client.post("/guard/pre-commit").status_code == 405
