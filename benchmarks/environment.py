"""What the bench runs against: the database's connection for the direct clients, its
settings, the checks that the statements still match the models, the commit and the
interpreter."""

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from rest_framework.settings import api_settings

from benchmarks import direct, load
from coordination.db import sql
from coordination.db.rows import dialect
from coordination.models import Issue
from coordination.paths import lock_nodes
from coordination.services import locking
from coordination.services.file_claims import claim


def direct_target(bench: load.BenchWorkspace, paths: set[str]) -> direct.DirectTarget:
    """Where the direct clients connect, and what they need of Django, built here so
    that their processes never import it."""
    options = dict(connection.settings_dict.get("OPTIONS") or {})
    return direct.DirectTarget(
        dialect=dialect(),
        connect=direct_connect_arguments(connection.settings_dict),
        key_hash=bench.key_hash,
        advisory_namespace=sql.ADVISORY_LOCK_KEYS["file_claim_path"],
        event_namespace=sql.ADVISORY_LOCK_KEYS["event_log"],
        closed_statuses=frozenset(str(status) for status in Issue.CLOSED_STATUSES),
        conflicts_shown=claim.MAX_CONFLICTS_SHOWN,
        page_size=api_page_size(),
        columns=dict(sql.COLUMNS),
        # Every node a claim of those paths locks: the paths and the directories above.
        lock_keys={node: locking.path_lock_key(bench.pk, node) for node in lock_nodes(paths)},
        prepare_threshold=options.get("prepare_threshold"),
    )


def api_page_size() -> int:
    """How many rows a page of the API's lists holds (DRF's PAGE_SIZE)."""
    size = api_settings.PAGE_SIZE
    assert size, "the API pages its lists"
    return int(size)


# Django's own connection settings, not libpq's.
DJANGO_ONLY_OPTIONS = {
    "server_side_binding",
    "prepare_threshold",
    "pool",
    "isolation_level",
    "assume_role",
    "cursor_factory",
    "context",
    "transaction_mode",
    "init_command",
}


def direct_connect_arguments(settings_dict: dict[str, Any]) -> dict[str, Any]:
    """What the direct clients pass to psycopg.connect / sqlite3.connect."""
    options = {
        key: value
        for key, value in (settings_dict.get("OPTIONS") or {}).items()
        if key not in DJANGO_ONLY_OPTIONS
    }
    if connection.vendor == "postgresql":
        names = {"dbname": "NAME", "user": "USER", "password": "PASSWORD", "host": "HOST"}
        arguments = {key: settings_dict[name] for key, name in names.items() if settings_dict[name]}
        if settings_dict.get("PORT"):
            arguments["port"] = int(settings_dict["PORT"])
        return {**options, **arguments}
    return {"database": str(settings_dict["NAME"]), "timeout": options.get("timeout", 5)}


def postgres_setting(name: str) -> str | None:
    """A PostgreSQL server setting (``SHOW``), or None on another database."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return str(cursor.fetchone()[0])


def git_commit() -> str | None:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(settings.BASE_DIR),
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None


def interpreter() -> str:
    """The Python the server runs on, with the file it is (the venv's ``python``
    resolved): figures from two builds of one version differ by up to a fifth."""
    return f"Python {platform.python_version()} ({os.path.realpath(sys.executable)})"
