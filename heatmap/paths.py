"""``PathHead``: the first *n* segments of a path, computed in the database.

The heatmap groups events by path prefix; truncating in SQL lets the database
count (``GROUP BY``) instead of shipping every event row to Python. PostgreSQL has
the string functions built in; SQLite gets a small deterministic function,
registered on each new connection.

A directory claim (``src/api/``, invariant 11 (overlap)) counts once, at its directory: its
head never keeps the trailing ``/`` (``src/api``), so it lands on the directory's
node, and being longer than its head it marks that node a directory. The segments
are cut as ``coordination.paths.head`` cuts them.
"""

from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.db.models import CharField, Func
from django.dispatch import receiver

from coordination.paths import SEPARATOR
from coordination.paths import head as path_head

SQLITE_FUNCTION = "projektor_path_head"


def _sqlite_path_head(path: str | None, segments: int) -> str | None:
    return None if path is None else path_head(path, segments)


@receiver(connection_created)
def register_sqlite_function(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_function(
            SQLITE_FUNCTION, 2, _sqlite_path_head, deterministic=True
        )


class PathHead(Func):
    """``PathHead("path", 2)``: the path cut after its second segment."""

    output_field = CharField()

    def __init__(self, expression: Any, segments: int, **extra: Any) -> None:
        if not 1 <= segments <= 64:
            raise ValueError("segments must be between 1 and 64")
        self.segments = int(segments)  # inlined in the SQL: a checked int, never input text
        super().__init__(expression, **extra)

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        path_sql, params = compiler.compile(self.source_expressions[0])
        # coordination.paths.head, in SQL: split, keep the first segments, join.
        sep = f"'{SEPARATOR}'"
        cut = f"array_to_string((string_to_array({path_sql}, {sep}))[1:{self.segments}], {sep})"
        sql = f"rtrim({cut}, {sep})"
        return sql, params

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        path_sql, params = compiler.compile(self.source_expressions[0])
        return f"{SQLITE_FUNCTION}({path_sql}, {self.segments})", params
