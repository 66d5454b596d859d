"""Running the statements of ``coordination.db.sql`` on Django's connection, and
model instances from their rows, with the values the ORM would give.

The statements every agent request makes (authenticate, heartbeat, claim and release
files, take a lease) are SQL: building and compiling a queryset cost three to four
times the database round trip it sends (about 0.6 ms against 0.2 ms per statement on
PostgreSQL, measured in-process), and a fleet pays that on every request. The rows
still come back as fully loaded model instances, so serializers and callers see no
difference and no later attribute read queries. On PostgreSQL they run on a cursor
that prepares them (``cursor``): the server parses and plans each once per connection.
"""

__all__ = [
    "Listing",
    "cursor",
    "dialect",
    "execute",
    "fetchall",
    "fetchone",
    "instance",
    "loaded_values",
    "rebuilt",
    "take",
]

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

from coordination.db.sql import COLUMNS, Dialect, Statement

M = TypeVar("M", bound=models.Model)


def dialect() -> Dialect:
    """The statements' dialect on this connection: ``dialect().live(alias)`` is the
    liveness predicate (invariant 1 (liveness), ``coordination.liveness``), ``dialect().now()``
    the clock."""
    return Dialect(
        connection.vendor,
        int(settings.PROJEKTOR_SESSION_TTL_SECONDS),
        int(settings.PROJEKTOR_STALL_AFTER_SECONDS),
    )


def cursor(using: str = DEFAULT_DB_ALIAS) -> CursorWrapper:
    """The cursor the statements run on: on PostgreSQL one whose statements the server
    binds and, once a connection has run them often enough, prepares
    (``projektor.postgresql``); elsewhere Django's own."""
    db = connections[using]
    prepared_cursor: Callable[[], CursorWrapper] | None = getattr(db, "prepared_cursor", None)
    return prepared_cursor() if prepared_cursor is not None else db.cursor()


def execute(statement: Statement) -> int:
    """Run ``statement``; return how many rows it changed."""
    sql, params = statement
    with cursor() as running:
        running.execute(sql, params)
        return int(running.rowcount)


def fetchone(statement: Statement) -> tuple[Any, ...] | None:
    sql, params = statement
    with cursor() as running:
        running.execute(sql, params)
        row: tuple[Any, ...] | None = running.fetchone()
        return row


def fetchall(statement: Statement) -> list[tuple[Any, ...]]:
    sql, params = statement
    with cursor() as running:
        running.execute(sql, params)
        return list(running.fetchall())


# A field's converters, with the column they are called with; () for none.
Converters = tuple[tuple[Callable[..., Any], ...], Any]


@dataclass(frozen=True)
class LoadPlan:
    """How a row of ``sql.COLUMNS[table]`` (the model's concrete columns, in field
    order: ``coordination.db.columns``) becomes ``model``'s ``from_db`` arguments: each
    field's converters. Made once per model and connection (the converters are the
    connection's own methods): asking Django for them, field by field through the
    connection proxy, cost twice the loading itself (10 claims: ~0.25 ms of a claim
    request, profiled)."""

    width: int  # len(sql.COLUMNS[table])
    attnames: list[str]  # the concrete fields', in the order from_db takes them
    converters: list[Converters]


# Per connection (each thread has its own), per model, kept on the connection so that
# they go with it. Not in a table keyed weakly by the connections: a plan's converters
# are bound to its connection's operations, so the table kept every connection alive,
# and a server that starts a thread per request (``runserver``, as ``make run`` serves)
# leaked a connection and its plans on each request.
PLANS_ATTRIBUTE = "projektor_load_plans"


def load_plan(db: BaseDatabaseWrapper, model: type[models.Model]) -> LoadPlan:
    plans: dict[type[models.Model], LoadPlan] = db.__dict__.setdefault(PLANS_ATTRIBUTE, {})
    plan = plans.get(model)
    if plan is None:
        table = model._meta.db_table
        fields = model._meta.concrete_fields
        if COLUMNS.get(table) != tuple(field.column for field in fields):
            raise KeyError(f"sql.COLUMNS[{table!r}] is not {model.__name__}'s columns")
        converters: list[Converters] = []
        for field in fields:
            column = field.get_col(table)
            found = db.ops.get_db_converters(column) + column.get_db_converters(db)
            converters.append((tuple(found), column))
        plan = LoadPlan(
            width=len(fields),
            attnames=[field.attname for field in fields],
            converters=converters,
        )
        plans[model] = plan  # a connection serves one thread: no race
    return plan


def instance(model: type[M], values: Sequence[Any]) -> M:
    """``model`` as the ORM loads it, from ``values`` of every column of its table
    (``sql.COLUMNS``, in that order): never a half-loaded instance.

    Values pass through the converters the ORM applies (on SQLite, datetimes arrive
    as text and become aware datetimes; booleans arrive as 0 and 1)."""
    db = connections[DEFAULT_DB_ALIAS]
    plan = load_plan(db, model)
    if len(values) != plan.width:
        raise ValueError(f"{model.__name__}: {len(values)} values for {plan.width} columns")
    converted = []
    for value, (converters, column) in zip(values, plan.converters, strict=True):
        if value is not None:
            for convert in converters:
                value = convert(value, column, db)
        converted.append(value)
    return model.from_db(db.alias, plan.attnames, converted)


def take(model: type[M], row: Sequence[Any], at: int) -> tuple[M | None, int]:
    """The instance of ``model`` whose columns start at ``row[at]`` (None when a LEFT
    JOIN found none), and where the next table's columns start."""
    end = at + len(COLUMNS[model._meta.db_table])
    values = row[at:end]
    return (instance(model, values) if values[0] is not None else None), end


def loaded_values(loaded: models.Model) -> tuple[Any, ...]:
    """A loaded instance's field values, converted, in ``from_db``'s order: what
    ``rebuilt`` makes a new instance from without the row or its converters."""
    plan = load_plan(connections[DEFAULT_DB_ALIAS], type(loaded))
    return tuple(loaded.__dict__[name] for name in plan.attnames)


def rebuilt(model: type[M], values: tuple[Any, ...]) -> M:
    """A new instance of ``model`` from ``loaded_values`` of another."""
    db = connections[DEFAULT_DB_ALIAS]
    return model.from_db(db.alias, load_plan(db, model).attnames, list(values))


@dataclass(frozen=True)
class Listing(Generic[M]):
    """A list of SQL rows that Django's paginator (and so DRF's) pages through as it
    does a queryset: ``count()`` runs one statement, a slice another (``LIMIT`` and
    ``OFFSET``), each row made an instance by ``load``. An empty slice sends none."""

    counted: Statement
    page: Callable[[int, int], Statement]  # (limit, offset)
    load: Callable[[Sequence[Any]], M]
    ordered = True  # the statements order their rows (the paginator warns otherwise)

    def count(self) -> int:
        row = fetchone(self.counted)
        assert row is not None
        return int(row[0])

    def __getitem__(self, window: slice) -> list[M]:
        start, stop, step = window.start or 0, window.stop, window.step
        if not isinstance(stop, int) or step not in (None, 1) or start < 0:
            raise TypeError("a Listing is sliced with [start:stop]")
        if stop <= start:
            return []
        return [self.load(row) for row in fetchall(self.page(stop - start, start))]
