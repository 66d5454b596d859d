"""On PostgreSQL times are read as Django's own loader reads them (its time zone put in
the value's place, naive without USE_TZ), but parsed by psycopg's loader in C
(``projektor.postgresql``): the same values, the same ``tzinfo``, the same errors."""

from datetime import UTC
from zoneinfo import ZoneInfo

import psycopg
import pytest
from django.db import connection
from django.db.backends.postgresql.base import TIMESTAMPTZ_OID
from django.db.backends.postgresql.psycopg_any import register_tzloader
from psycopg.pq import Format

from coordination.db import rows
from projektor.postgresql.base import TimestamptzLoader, adapters_template

TIMES = [
    "2026-12-05 09:30:00+00",
    "2026-12-05 09:30:00.123456+00",
    "2026-01-01 10:00:00.5+02",
    "2026-06-01 12:00:00-03:30",
    "2026-03-29 02:30:00+01",  # in Berlin's spring gap
    "1999-12-31 23:59:59.999999+00",
    "0001-01-01 00:00:00+00",
    "9999-12-31 23:59:59.999999+00",
    "2000-02-29 00:00:00+14",
]
OUT_OF_RANGE = ["infinity", "-infinity", "0001-01-01 00:00:00+05"]


def read(cursor: psycopg.Cursor, text: str) -> object:
    cursor.execute("SELECT %s::timestamptz", [text])
    row = cursor.fetchone()
    assert row is not None
    return row[0]


def outcome(cursor: psycopg.Cursor, text: str) -> tuple[object, object]:
    try:
        value = read(cursor, text)
    except psycopg.DataError as error:
        return "error", str(error)
    return value, getattr(value, "tzinfo", None)


ZONES = [UTC, ZoneInfo("Europe/Berlin"), ZoneInfo("America/St_Johns"), None]


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("zone", ZONES)
def test_times_are_read_as_djangos_loader_reads_them(zone):
    """Django sets the session's time zone to its own (UTC without USE_TZ) and reads
    each time in it; ours gives what its loader gives, value and tzinfo alike."""
    arguments = connection.get_connection_params()
    arguments.pop("context")
    with psycopg.connect(**arguments, autocommit=True) as raw:  # the SET outlives an error
        raw.execute(f"SET TimeZone = '{zone.key if isinstance(zone, ZoneInfo) else 'UTC'}'")
        djangos, ours = raw.cursor(), raw.cursor()
        register_tzloader(zone, djangos)
        loader = adapters_template(zone is not None, zone).get_loader(TIMESTAMPTZ_OID, Format.TEXT)
        ours.adapters.register_loader("timestamptz", loader)
        for text in TIMES + OUT_OF_RANGE:
            theirs, mine = outcome(djangos, text), outcome(ours, text)
            assert mine == theirs, text
            if mine[0] != "error":
                assert mine[1] is theirs[1], text  # the very tzinfo object, or None
        assert outcome(ours, "infinity")[0] == "error"


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_connections_and_their_cursors_read_times_with_it():
    """Django's connection, its cursors and the services' prepared cursor all read
    ``timestamptz`` with it, in Django's time zone: Django's cursor does not put its
    own loader back."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        loader = cursor.cursor.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)
        assert issubclass(loader, TimestamptzLoader)
        assert loader.timezone == connection.timezone
        assert cursor.fetchone()[0].tzinfo is connection.timezone
    with rows.cursor() as cursor:
        loader = cursor.cursor.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)
        assert issubclass(loader, TimestamptzLoader)
    default = connection.connection.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)
    assert issubclass(default, TimestamptzLoader)
