"""The one liveness predicate (invariant 1 (liveness)).

A session is live iff ``status = 'active'`` and its last heartbeat is younger than
``PROJEKTOR_SESSION_TTL_SECONDS``. Heartbeats are written and judged with the
database's clock (``DbNow``: the statement's time) so app servers whose clocks drift
still agree. The ORM form here and the raw-SQL form (``coordination.db.sql.Dialect``,
on the connection's ``coordination.db.rows.dialect()``) are the same predicate; every
listing, reclaim and admission check goes through one of them.

The models' floor: it imports nothing of coordination.
"""

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import DateTimeField, ExpressionWrapper, Q, Value
from django.db.models.functions import Now


class DbNow(Now):
    """The database's clock, stored in the same text format Django writes on SQLite.

    SQLite's ``%f`` has milliseconds only; padding to microseconds keeps text
    comparisons with Django-written datetimes (filters, ``since``) correct.
    """

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return self.as_sql(
            compiler,
            connection,
            template="(STRFTIME('%%%%Y-%%%%m-%%%%d %%%%H:%%%%M:%%%%f', 'NOW') || '000')",
            **extra_context,
        )


def session_ttl() -> timedelta:
    return timedelta(seconds=settings.PROJEKTOR_SESSION_TTL_SECONDS)


def live_cutoff() -> ExpressionWrapper:
    """Database-side ``now() - TTL``."""
    return ExpressionWrapper(DbNow() - Value(session_ttl()), output_field=DateTimeField())


def live_q(prefix: str = "") -> Q:
    """Q for "the session at ``prefix`` is live" (``prefix`` like ``"session__"``)."""
    return Q(**{f"{prefix}status": "active", f"{prefix}last_heartbeat_at__gt": live_cutoff()})


def stall_after() -> timedelta:
    return timedelta(seconds=settings.PROJEKTOR_STALL_AFTER_SECONDS)


def stalled_q(prefix: str = "") -> Q:
    """Q for "the session at ``prefix`` is stalled" (invariant 17 (stalled is derived)): live, and
    its last progress older than ``PROJEKTOR_STALL_AFTER_SECONDS`` by the database's clock."""
    cutoff = ExpressionWrapper(DbNow() - Value(stall_after()), output_field=DateTimeField())
    return live_q(prefix) & Q(**{f"{prefix}last_progress_at__lte": cutoff})


def young_q(prefix: str = "") -> Q:
    """Q for "the lease at ``prefix`` is within its project's age cap" (invariant 17 (stalled is
    derived))."""
    return Q(**{f"{prefix}ages_out_at__isnull": True}) | Q(**{f"{prefix}ages_out_at__gt": DbNow()})
