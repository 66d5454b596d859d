"""``create_api_key``: a key for a new or an existing workspace, printed alone."""

from io import StringIO

import pytest
from django.core.management import call_command

from coordination.models import ApiKey, Workspace, hash_api_key

pytestmark = pytest.mark.django_db


def test_create_api_key_creates_the_workspace_and_prints_only_the_key():
    out = StringIO()
    call_command("create_api_key", "new-team", stdout=out)
    raw = out.getvalue().strip()
    assert "\n" not in raw and raw.startswith(ApiKey.PREFIX)
    key = ApiKey.objects.get()
    assert key.workspace.slug == "new-team" and key.key_hash == hash_api_key(raw)


def test_create_api_key_reuses_an_existing_workspace(workspace):
    call_command("create_api_key", "acme", stdout=StringIO())
    assert Workspace.objects.count() == 1 and ApiKey.objects.get().workspace == workspace
