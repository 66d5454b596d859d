"""Rebuild the rollups from the event rows: the migration that adds them, the bench's
bulk load (with the triggers off), and an operator's ``manage.py recount_heatmap``
after writing event rows by hand. The triggers keep them exact from then on."""

from django.db import connection, transaction

from heatmap.models import RollupDay, RollupKey
from heatmap.rollups.triggers import DAYS, ISSUES, KEYS, SOURCES, Source


def day_of(column: str) -> str:
    if connection.vendor == "postgresql":
        return f"({column} AT TIME ZONE 'UTC')::date"
    return f"date({column})"


def _per_day(source: Source, where: str) -> str:
    return (
        f"SELECT r.workspace_id, i.project_id, r.path, {day_of('r.' + source.at)} AS day,"
        f" count(*) AS n FROM {source.table} r JOIN {ISSUES} i ON i.id = r.{source.issue}"
        f" {where} GROUP BY r.workspace_id, i.project_id, r.path, {day_of('r.' + source.at)}"
    )


def recount(workspace_id: int | None = None) -> None:
    """Every key and day of ``workspace_id`` (or of every workspace), from the rows."""
    keys = RollupKey.objects.all()
    where, params = "", []
    if workspace_id is not None:
        keys = keys.filter(workspace_id=workspace_id)
        where, params = "WHERE r.workspace_id = %s", [workspace_id]
    with transaction.atomic():
        RollupDay.objects.filter(key__in=keys).delete()
        keys.delete()
        with connection.cursor() as cursor:
            for source in SOURCES:
                cursor.execute(
                    f"INSERT INTO {KEYS} (workspace_id, project_id, mode, path, first_day,"
                    f" last_day) SELECT workspace_id, project_id, '{source.mode}', path,"
                    f" min(day), max(day) FROM ({_per_day(source, where)}) x"
                    " GROUP BY workspace_id, project_id, path",
                    params,
                )
                cursor.execute(
                    f"INSERT INTO {DAYS} (key_id, day, n, before)"
                    " SELECT k.id, x.day, x.n,"
                    " sum(x.n) OVER (PARTITION BY k.id ORDER BY x.day) - x.n"
                    f" FROM ({_per_day(source, where)}) x JOIN {KEYS} k"
                    " ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id"
                    f" AND k.mode = '{source.mode}' AND k.path = x.path",
                    params,
                )
