"""The append-only logs (claim_conflicts, wip_cap_denials) and their one door.

The database refuses every UPDATE and DELETE of log rows (migration 0007). A few
whole-workspace operations must still touch them: deleting a workspace (its logs go
with it) and building the demo history (which moves its rows into the past).
``unlocked`` opens the door for one workspace, inside one transaction, and shuts it
before that transaction commits.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import transaction

from coordination.db import sql
from coordination.db.rows import execute
from coordination.models import Workspace

UNLOCK_TABLE = sql.LOG_UNLOCK
EVERY_WORKSPACE = 0


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
