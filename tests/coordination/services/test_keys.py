"""API key lookup: by the digest of the raw key, never a revoked one."""

import pytest

from coordination.models import ApiKey
from coordination.services import keys

pytestmark = pytest.mark.django_db


def test_the_key_lookup_gives_key_and_workspace(workspace):
    key, raw = ApiKey.issue(workspace, "fleet")
    found = keys.active_key(raw)
    assert found is not None and found.pk == key.pk and found.workspace.slug == "acme"
    assert found.created_at == ApiKey.objects.get(pk=key.pk).created_at
    assert keys.active_key(raw + "x") is None
    key.revoked_at = key.created_at
    key.save()
    assert keys.active_key(raw) is None
