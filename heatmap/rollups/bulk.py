"""The heatmap's part in a bulk load (``coordination.services.bulk``): its triggers
off while the rows are written, then every rollup and day count of the workspace
recounted from them, in the load's transaction (the bulk path of invariants 14 (rollups) and 15 (day
counts))."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

from heatmap.rollups import triggers
from heatmap.rollups.recount import recount


@contextmanager
def loading(workspace_id: int) -> Iterator[None]:
    triggers.uninstall(connection)
    yield  # a load that raises rolls back, the triggers' removal with it
    triggers.install(connection)
    recount(workspace_id)
