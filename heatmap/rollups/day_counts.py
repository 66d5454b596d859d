"""The triggers that keep the health page's per-day counts (``heatmap.models.DayCount``)
exact, in the writer's transaction (invariant 15 (day counts)).

Four series, each one table counted by one time column and one kind: conflicts by
``occurred_at`` (rejected or forced), WIP-cap denials by ``occurred_at``, and lease and
file-claim releases by ``released_at`` (the reason). A row whose time is ``NULL``
(a lease or claim still held) is not counted. Each table gets three triggers: after
an insert (adds), after a delete (takes away), and after an update (takes the old row
away and adds the new one: a release moves a claim from uncounted to counted; an
update that changes neither time nor kind adds nothing).

**Writers never queue on a counter.** A workspace's day of one series is one number
that every release adds to, so one counter row would be locked by each releaser to
its commit, and every releaser of the workspace would wait on the one before. So a
day's count is the sum of its rows, and on PostgreSQL each writer adds to a row that
no other open transaction holds (``FOR UPDATE SKIP LOCKED``), or makes one when every
row is held: a writer never waits for another, so there is no queue and no deadlock,
and a day has about as many rows as it had writers at once. A transaction that adds
twice finds its own row again (its lock does not hold itself off). SQLite has one
writer at a time: its triggers add to the day's first row.

**Costs.** PostgreSQL runs each trigger once per statement over its rows (transition
tables): one grouped read and, per day and kind, one update or insert. A release of
ten claims is one row added to. An update trigger cannot name its columns when it
reads transition tables, so every update of these tables runs it; their updates are
releases (and the demo clock's moves into the past). SQLite runs two short statements per
counted row.

Changing this SQL needs a migration that carries it and installs it (``triggers``).
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection

from coordination.models import ClaimConflict, FileClaim, IssueLease, WipCapDenial
from heatmap.models import DayCount, DayCountSeries

COUNTS = DayCount._meta.db_table


@dataclass(frozen=True)
class Series:
    table: str
    series: str
    at: str  # the time column; NULL: not counted
    kind: str  # SQL of the kind, over a row named ``r``
    only: str = "true"  # SQL of which rows count, over ``r``

    @property
    def name(self) -> str:
        return f"heatmap_count_{self.series}"

    def of(self, ref: str, sql: str | None = None) -> str:
        return (self.kind if sql is None else sql).replace("r.", f"{ref}.")

    def counts(self, ref: str) -> str:
        """Whether the row ``ref`` is counted."""
        return f"{ref}.{self.at} IS NOT NULL AND ({self.of(ref, self.only)})"


SERIES = (
    Series(
        ClaimConflict._meta.db_table,
        DayCountSeries.CONFLICTS.value,
        "occurred_at",
        "CASE WHEN r.forced THEN 'forced' ELSE 'rejected' END",
    ),
    Series(WipCapDenial._meta.db_table, DayCountSeries.WIP_DENIALS.value, "occurred_at", "''"),
    Series(
        IssueLease._meta.db_table,
        DayCountSeries.LEASE_RELEASES.value,
        "released_at",
        "r.release_reason",
    ),
    Series(
        FileClaim._meta.db_table,
        DayCountSeries.CLAIM_RELEASES.value,
        "released_at",
        "r.release_reason",
    ),
    # The board's, per issue: its claims, and its conflicts on either side (a
    # conflict with itself once).
    Series(
        FileClaim._meta.db_table,
        DayCountSeries.ISSUE_CLAIMS.value,
        "claimed_at",
        "CAST(r.issue_id AS text)",
    ),
    Series(
        ClaimConflict._meta.db_table,
        DayCountSeries.ISSUE_REJECTED.value,
        "occurred_at",
        "CAST(r.rejected_issue_id AS text)",
    ),
    Series(
        ClaimConflict._meta.db_table,
        DayCountSeries.ISSUE_HELD.value,
        "occurred_at",
        "CAST(r.holding_issue_id AS text)",
        only="r.holding_issue_id <> r.rejected_issue_id",
    ),
)


def day_of(column: str) -> str:
    if connection.vendor == "postgresql":
        return f"({column} AT TIME ZONE 'UTC')::date"
    return f"date({column})"


# --- PostgreSQL: set-based, over a statement's rows ------------------------------------


def _pg_function(series: Series, parts: list[tuple[str, int]]) -> str:
    """Add each of ``parts`` (a transition table, counted ``+1`` or ``-1``) to the
    counts, per workspace, kind and day, on rows no other transaction holds."""
    rows = " UNION ALL ".join(
        f"SELECT r.workspace_id, {series.kind} AS kind,"
        f" (r.{series.at} AT TIME ZONE 'UTC')::date AS day, {sign} AS n"
        f" FROM {table} r WHERE {series.counts('r')}"
        for table, sign in parts
    )
    return f"""
    CREATE OR REPLACE FUNCTION {series.name}_{"_".join(t for t, _ in parts)}()
    RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE c record;
    BEGIN
    FOR c IN SELECT workspace_id, kind, day, sum(n) AS n FROM ({rows}) x
             GROUP BY workspace_id, kind, day HAVING sum(n) <> 0
    LOOP
        UPDATE {COUNTS} SET n = {COUNTS}.n + c.n WHERE id = (
            SELECT id FROM {COUNTS} WHERE workspace_id = c.workspace_id
            AND series = '{series.series}' AND day = c.day AND kind = c.kind
            LIMIT 1 FOR UPDATE SKIP LOCKED);
        IF NOT FOUND THEN
            INSERT INTO {COUNTS} (workspace_id, series, kind, day, n)
            VALUES (c.workspace_id, '{series.series}', c.kind, c.day, c.n);
        END IF;
    END LOOP;
    RETURN NULL;
    END;
    $$
    """


def postgresql(series: Series) -> Iterator[str]:
    for event, references, parts in (
        ("INSERT", "NEW TABLE AS new_rows", [("new_rows", 1)]),
        ("DELETE", "OLD TABLE AS old_rows", [("old_rows", -1)]),
        (
            "UPDATE",
            "OLD TABLE AS old_rows NEW TABLE AS new_rows",
            [("old_rows", -1), ("new_rows", 1)],
        ),
    ):
        yield _pg_function(series, parts)
        yield (
            f"CREATE TRIGGER {series.name}_{event.lower()} AFTER {event} ON {series.table}"
            f" REFERENCING {references} FOR EACH STATEMENT"
            f" EXECUTE FUNCTION {series.name}_{'_'.join(t for t, _ in parts)}()"
        )


def _pg_dropping(series: Series) -> Iterator[str]:
    for event in ("insert", "delete", "update"):
        yield f"DROP TRIGGER IF EXISTS {series.name}_{event} ON {series.table}"
    for functions in ("new_rows", "old_rows", "old_rows_new_rows"):
        yield f"DROP FUNCTION IF EXISTS {series.name}_{functions}()"


# --- SQLite: row by row ----------------------------------------------------------------


def _sqlite_counted(series: Series, ref: str, sign: str) -> str:
    day = f"date({ref}.{series.at})"
    same = (
        f"workspace_id = {ref}.workspace_id AND series = '{series.series}'"
        f" AND kind = {series.of(ref)} AND day = {day}"
    )
    return f"""
    INSERT INTO {COUNTS} (workspace_id, series, kind, day, n)
    SELECT {ref}.workspace_id, '{series.series}', {series.of(ref)}, {day}, 0
    WHERE {series.counts(ref)} AND NOT EXISTS (SELECT 1 FROM {COUNTS} WHERE {same});
    UPDATE {COUNTS} SET n = n {sign} 1
    WHERE {series.counts(ref)} AND id = (SELECT min(id) FROM {COUNTS} WHERE {same});
    """


def sqlite(series: Series) -> Iterator[str]:
    moved = (
        f"OLD.{series.at} IS NOT NEW.{series.at} OR {series.of('OLD')} IS NOT {series.of('NEW')}"
    )
    yield (
        f"CREATE TRIGGER {series.name}_insert AFTER INSERT ON {series.table}"
        f" FOR EACH ROW WHEN {series.counts('NEW')}"
        f" BEGIN {_sqlite_counted(series, 'NEW', '+')} END"
    )
    yield (
        f"CREATE TRIGGER {series.name}_delete AFTER DELETE ON {series.table}"
        f" FOR EACH ROW WHEN {series.counts('OLD')}"
        f" BEGIN {_sqlite_counted(series, 'OLD', '-')} END"
    )
    yield (
        f"CREATE TRIGGER {series.name}_update AFTER UPDATE ON {series.table}"
        f" FOR EACH ROW WHEN {moved} BEGIN"
        f" {_sqlite_counted(series, 'OLD', '-')} {_sqlite_counted(series, 'NEW', '+')} END"
    )


# --- installing and counting -------------------------------------------------------------


def creating(vendor: str) -> list[str]:
    make = postgresql if vendor == "postgresql" else sqlite
    return [statement for series in SERIES for statement in make(series)]


def dropping(vendor: str) -> list[str]:
    if vendor == "postgresql":
        return [statement for series in SERIES for statement in _pg_dropping(series)]
    return [
        f"DROP TRIGGER IF EXISTS {series.name}_{event}"
        for series in SERIES
        for event in ("insert", "delete", "update")
    ]


def recount(cursor: Any, workspace_id: int | None) -> None:
    """Every day count of ``workspace_id`` (or of every workspace), from the rows: one
    row per workspace, series, kind and day. The caller has deleted the old ones."""
    where, params = ("AND r.workspace_id = %s", [workspace_id]) if workspace_id else ("", [])
    for series in SERIES:
        day = day_of(f"r.{series.at}")
        cursor.execute(
            f"INSERT INTO {COUNTS} (workspace_id, series, kind, day, n)"
            f" SELECT r.workspace_id, '{series.series}', {series.kind}, {day}, count(*)"
            f" FROM {series.table} r WHERE {series.counts('r')} {where}"
            " GROUP BY 1, 3, 4",
            params,
        )
