"""Rebuild the rollups and the health page's day counts from the event rows: the
migrations that add them, the bench's bulk load (with the triggers off), and an
operator's ``manage.py recount_heatmap`` after writing event rows by hand. The
triggers keep them exact from then on."""

from django.db import connection, transaction

from heatmap.models import DayCount, RollupDay, RollupKey
from heatmap.rollups import day_counts
from heatmap.rollups.triggers import DAYS, ISSUES, KEYS, SOURCES, Source

COUNTED = "heatmap_recount"  # a temporary table: one source's events per key and day


def day_of(column: str) -> str:
    if connection.vendor == "postgresql":
        return f"({column} AT TIME ZONE 'UTC')::date"
    return f"date({column})"


def _per_day(source: Source, where: str) -> str:
    day = day_of(f"r.{source.at}")
    return (
        f"SELECT r.workspace_id, i.project_id, r.path, {day} AS day, count(*) AS n"
        f" FROM {source.table} r JOIN {ISSUES} i ON i.id = r.{source.issue} {where}"
        f" GROUP BY r.workspace_id, i.project_id, r.path, {day}"
    )


def every_day(source: Source, key_where: str) -> str:
    """``(key_id, day)``: every day from each key's first day to its last, the rows
    the triggers keep (``heatmap.models``)."""
    keys = f"WHERE mode = '{source.mode}' {key_where}"
    if connection.vendor == "postgresql":
        return (
            f"SELECT id AS key_id, first_day + i AS day FROM {KEYS},"
            f" generate_series(0, last_day - first_day) i {keys}"
        )
    return (
        "WITH RECURSIVE g(key_id, day, last_day) AS ("
        f" SELECT id, first_day, last_day FROM {KEYS} {keys}"
        " UNION ALL SELECT key_id, date(day, '+1 day'), last_day FROM g WHERE day < last_day)"
        " SELECT key_id, day FROM g"
    )


def recount(workspace_id: int | None = None) -> None:
    """Every key and day of ``workspace_id`` (or of every workspace), from the rows."""
    keys = RollupKey.objects.all()
    where, key_where, params = "", "", []
    if workspace_id is not None:
        keys = keys.filter(workspace_id=workspace_id)
        where, key_where, params = (
            "WHERE r.workspace_id = %s",
            "AND workspace_id = %s",
            [workspace_id],
        )
    with transaction.atomic(), connection.cursor() as cursor:
        RollupDay.objects.filter(key__in=keys).delete()
        keys.delete()
        counts = DayCount.objects.all()
        if workspace_id is not None:
            counts = counts.filter(workspace_id=workspace_id)
        counts.delete()
        day_counts.recount(cursor, workspace_id)
        for source in SOURCES:
            # Counted once, then analysed: the joins below are planned on true sizes.
            cursor.execute(f"CREATE TEMPORARY TABLE {COUNTED} AS {_per_day(source, where)}", params)
            cursor.execute(f"ANALYZE {COUNTED}")
            cursor.execute(
                f"INSERT INTO {KEYS}"
                " (workspace_id, project_id, mode, path, first_day, last_day, total)"
                f" SELECT workspace_id, project_id, '{source.mode}', path, min(day), max(day),"
                " sum(n)"
                f" FROM {COUNTED} GROUP BY workspace_id, project_id, path"
            )
            cursor.execute(f"ANALYZE {KEYS}")
            cursor.execute(
                f"INSERT INTO {DAYS} (key_id, day, n, before)"
                " SELECT g.key_id, g.day, coalesce(x.n, 0), coalesce(sum(x.n) OVER ("
                " PARTITION BY g.key_id ORDER BY g.day ROWS BETWEEN UNBOUNDED PRECEDING"
                " AND 1 PRECEDING), 0)"
                f" FROM ({every_day(source, key_where)}) g JOIN {KEYS} k ON k.id = g.key_id"
                f" LEFT JOIN {COUNTED} x ON x.workspace_id = k.workspace_id"
                " AND x.project_id = k.project_id AND x.path = k.path AND x.day = g.day",
                params,
            )
            cursor.execute(f"DROP TABLE {COUNTED}")
