"""API keys: the lookup every agent request starts with."""

from coordination.models import ApiKey, Workspace, hash_api_key
from coordination.services import sql
from coordination.services.rows import fetchone, take


def active_key(raw_key: str) -> ApiKey | None:
    """The unrevoked key whose SHA-256 digest is that of ``raw_key``, with its
    workspace, in one indexed query; ``None`` if there is none."""
    row = fetchone(sql.active_key(hash_api_key(raw_key)))
    if row is None:
        return None
    key, at = take(ApiKey, row, 0)
    assert key is not None
    workspace, _ = take(Workspace, row, at)
    assert workspace is not None
    key.workspace = workspace
    return key
