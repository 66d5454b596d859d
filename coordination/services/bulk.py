"""Bulk loads: many history rows of one workspace written in a few statements (a
bench's history, an import).

Another app may keep tables derived from coordination's rows by triggers, as the
heatmap keeps its rollups and day counts (invariants 14 (rollups) and 15 (day counts)). Through
those triggers, a long history in one statement costs more than the rows themselves, so
such an app registers a loader: a context that turns its triggers off for the load
and rebuilds its tables of the workspace from the rows after. ``loading`` enters
every registered loader in one transaction, so no other transaction ever sees the
rows without what is derived from them, and a failed load leaves both as they were.
"""

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager

from django.db import transaction

Loader = Callable[[int], AbstractContextManager[None]]

_loaders: list[Loader] = []


def register(loader: Loader) -> None:
    if loader not in _loaders:
        _loaders.append(loader)


@contextmanager
def loading(workspace_id: int) -> Iterator[None]:
    """Write a bulk load of ``workspace_id``'s rows inside this block."""
    with transaction.atomic(), ExitStack() as loaders:
        for loader in _loaders:
            loaders.enter_context(loader(workspace_id))
        yield
