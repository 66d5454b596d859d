"""API keys: the lookup every agent request starts with."""

from django.db import connection

from coordination.models import ApiKey, Workspace, hash_api_key
from coordination.services.rows import instance

KEY_COLUMNS = ["id", "workspace_id", "name", "key_prefix", "key_hash", "created_at", "revoked_at"]
WORKSPACE_COLUMNS = ["id", "slug", "name", "created_at"]


def active_key(raw_key: str) -> ApiKey | None:
    """The unrevoked key whose SHA-256 digest is that of ``raw_key``, with its
    workspace, in one indexed query; ``None`` if there is none."""
    columns = [f"k.{name}" for name in KEY_COLUMNS] + [f"w.{name}" for name in WORKSPACE_COLUMNS]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT {", ".join(columns)}
            FROM {ApiKey._meta.db_table} k
            JOIN {Workspace._meta.db_table} w ON w.id = k.workspace_id
            WHERE k.key_hash = %s AND k.revoked_at IS NULL
            """,
            [hash_api_key(raw_key)],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    key = instance(ApiKey, KEY_COLUMNS, row[: len(KEY_COLUMNS)])
    key.workspace = instance(Workspace, WORKSPACE_COLUMNS, row[len(KEY_COLUMNS) :])
    return key
