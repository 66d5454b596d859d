"""The append-only logs (claim_conflicts, wip_cap_denials) and their one door.

The database refuses every UPDATE and DELETE of log rows (migration 0007). One
whole-workspace operation must still touch them: deleting a workspace (its logs go
with it). ``unlocked`` opens the door for one workspace, inside one transaction, and
shuts it before that transaction commits.

A history written after the fact (the demo's month) is not moved into the past
afterwards, as other rows may be: inside ``recorded_earlier(by)`` the log rows are
written with the past stamp they keep, the database's now minus ``by``.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta

from django.db import transaction

from coordination.db import sql
from coordination.db.rows import execute
from coordination.models import Workspace

UNLOCK_TABLE = sql.LOG_UNLOCK
EVERY_WORKSPACE = 0

_earlier_by: ContextVar[timedelta | None] = ContextVar("log_rows_earlier_by", default=None)


@contextmanager
def recorded_earlier(by: timedelta) -> Iterator[None]:
    """Stamp the log rows written inside the block ``by`` before the database's now."""
    token = _earlier_by.set(by)
    try:
        yield
    finally:
        _earlier_by.reset(token)


def recording_offset() -> timedelta | None:
    """How far before now a log row written here is stamped (``None``: now)."""
    return _earlier_by.get()


@contextmanager
def unlocked(workspace_id: int) -> Iterator[None]:
    # On an error the transaction rolls back, and the unlock row with it.
    with transaction.atomic():
        execute(sql.open_log_door(workspace_id=workspace_id))
        yield
        execute(sql.close_log_door(workspace_id=workspace_id))


def delete_workspace(workspace: Workspace) -> None:
    """Delete a tenant and everything it holds, its logs included."""
    with unlocked(workspace.pk):
        workspace.delete()
