"""The triggers that keep the heatmap's rollups exact, in the writer's transaction
(invariant 14 (rollups)).

Each event table (``issue_file_claims`` by ``claimed_at``, ``claim_conflicts`` by
``occurred_at``) gets three: after an insert, after a delete, and after an update
that moves a row's path, time or issue. An event on day ``D`` of key ``K`` (its
workspace, its issue's project, the mode, its path) first makes the rows ``K`` lacks
from its rows to ``D`` (a day after its last row with ``before`` its events so far,
a day before its first with none; for an event of today, usually none or today's),
then adds to ``n`` of ``(K, D)``, to ``before`` of every later row of ``K`` (none,
for an event of today), and to ``K``'s ``total``. A removal subtracts the same and
leaves the row in place. So ``K`` has a row for every day from its first to its
last, ``before`` of its row of ``day`` is the number of its events before ``day``,
and ``total`` the number of all its events (``heatmap.models``).

**Exact under concurrency.** SQLite has one writer at a time. On PostgreSQL (READ
COMMITTED) two writers of one key could otherwise race: one making a key's first row
of a new day computes ``before`` from the rows it sees, while the other adds to an
earlier day and updates only the later rows it sees. So every writer first locks the
key's row (an insert by adding to its ``total`` with ``ON CONFLICT DO UPDATE``, a
removal with ``FOR UPDATE``) and keeps it to its commit:
writers of one key take turns, and each statement after the lock sees the other's
committed rows. Lock order: each insert statement locks its keys in path order, all
of one issue's project and one mode (a conflict log of over a thousand rows is
several inserts, each in path order); and a claim transaction already holds its
paths' advisory locks (``coordination.services.file_claims``), so two claimers that
share a key were already queued on a path lock before either reaches it.

**Costs.** PostgreSQL runs the insert trigger once per statement, over the
statement's rows (transition tables): two statements per insert, grouped by key and
day (lock the keys; then make the missing days, already counted, and count the rows
there were), and three per removal. A row is written once per statement, however
many days the statement brings (a bulk load of a long history).
SQLite runs three short statements per inserted row and two per removed one.
Updates (the demo clock's moves into the past) fire only when path, time or issue changes,
so releases cost nothing.

A project is counted as the issue's project when the event was written; moving an
issue to another project later leaves its past events where they were counted.

Changing this SQL needs a migration that carries the new SQL as a literal and installs
it (as heatmap 0005 does): a migration never calls this module, so a database is left
with the SQL of its last migration, and ``tests/heatmap/test_migration_triggers.py``
fails until the migration is there.
"""

from collections.abc import Iterator
from dataclasses import dataclass

from django.db.backends.base.base import BaseDatabaseWrapper

from coordination.models import ClaimConflict, FileClaim, Issue
from heatmap.models import RollupDay, RollupKey, RollupMode
from heatmap.rollups import day_counts


@dataclass(frozen=True)
class Source:
    table: str
    mode: str
    at: str  # the time column
    issue: str  # the column naming the issue whose project counts it

    @property
    def name(self) -> str:
        return f"heatmap_rollup_{self.mode}"


SOURCES = (
    Source(FileClaim._meta.db_table, RollupMode.CLAIMS.value, "claimed_at", "issue_id"),
    Source(
        ClaimConflict._meta.db_table,
        RollupMode.CONTENTION.value,
        "occurred_at",
        "rejected_issue_id",
    ),
)
KEYS = RollupKey._meta.db_table
DAYS = RollupDay._meta.db_table
ISSUES = Issue._meta.db_table
KEY_COLUMNS = "(workspace_id, project_id, mode, path)"


# --- PostgreSQL: set-based, over a statement's rows ------------------------------------


def _pg_keyed(source: Source, rows: str) -> str:
    """``(key_id, day, n)`` of ``rows`` (columns workspace_id, issue_id, path, at)."""
    return (
        "SELECT k.id AS key_id, x.day, x.n FROM ("
        " SELECT r.workspace_id, i.project_id, r.path,"
        " (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n"
        f" FROM ({rows}) r JOIN {ISSUES} i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4"
        f") x JOIN {KEYS} k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id"
        f" AND k.mode = '{source.mode}' AND k.path = x.path"
    )


def _pg_by_day(source: Source, rows: str) -> str:
    """``y``: ``rows``' events per key and day, with ``upto``, the key's events of
    ``rows`` up to that day, and ``until``, the key's next day in ``rows``: each row of
    the key from ``day`` to before ``until`` has ``upto`` of them before it, but ``n``
    fewer on ``day`` itself."""
    return f"""
    y AS (
        SELECT key_id, day, n, sum(n) OVER w AS upto,
               COALESCE(lead(day) OVER w, 'infinity') AS until
        FROM ({_pg_keyed(source, rows)}) z
        WINDOW w AS (PARTITION BY key_id ORDER BY day))"""


def _pg_counted(sign: str) -> str:
    """Add (``sign`` ``+``) or take away (``-``) ``y``'s events: to ``n`` of their own
    days and to ``before`` of every later day of their keys. Each row of a key is read
    once, from the key's first new day on, however many days a statement brings."""
    return f"""
    UPDATE {DAYS} SET n = {DAYS}.n {sign} c.n, before = {DAYS}.before {sign} c.later
    FROM (
        SELECT d.id, CASE WHEN d.day = y.day THEN y.n ELSE 0 END AS n,
               CASE WHEN d.day = y.day THEN y.upto - y.n ELSE y.upto END AS later
        FROM y JOIN {DAYS} d ON d.key_id = y.key_id AND d.day >= y.day AND d.day < y.until
    ) c
    WHERE {DAYS}.id = c.id;
    """


def _pg_filled() -> str:
    """Make the rows ``y``'s days need, already counted: every day from a key's new
    days to its rows (a key's rows run from its first day to its last). A day after
    the key's last row has the key's events so far before it, a day before its first
    (or any of a new key's) none, each plus the new events of earlier days."""
    return f"""
    span AS (
        SELECT s.key_id, g.day,
               CASE WHEN f.day IS NULL OR g.day < f.day THEN 0 ELSE l.upto END AS had
        FROM (SELECT key_id, min(day) AS lo, max(day) AS hi FROM y GROUP BY key_id) s
        LEFT JOIN LATERAL (
            SELECT d.day FROM {DAYS} d WHERE d.key_id = s.key_id ORDER BY d.day LIMIT 1) f ON true
        LEFT JOIN LATERAL (
            SELECT d.day, d.before + d.n AS upto FROM {DAYS} d
            WHERE d.key_id = s.key_id ORDER BY d.day DESC LIMIT 1) l ON true
        CROSS JOIN LATERAL (
            -- Before its first row (or all of a new key's), then after its last.
            SELECT s.lo + i AS day FROM generate_series(0, COALESCE(f.day - 1, s.hi) - s.lo) i
            UNION ALL
            SELECT l.day + i FROM generate_series(1, s.hi - l.day) i) g),
    filled AS (
        INSERT INTO {DAYS} (key_id, day, n, before)
        SELECT key_id, day, n, had + upto - n FROM (
            -- The new events up to each missing day, from those of every new day.
            SELECT COALESCE(m.key_id, y.key_id) AS key_id, COALESCE(m.day, y.day) AS day,
                   m.had, COALESCE(y.n, 0) AS n,
                   sum(COALESCE(y.n, 0)) OVER (
                       PARTITION BY COALESCE(m.key_id, y.key_id)
                       ORDER BY COALESCE(m.day, y.day)) AS upto
            FROM span m FULL JOIN y ON y.key_id = m.key_id AND y.day = m.day) t
        WHERE had IS NOT NULL
        ORDER BY key_id, day)"""


def _pg_insertion(source: Source, rows: str) -> str:
    # One statement makes the missing rows and counts the rows there were: its
    # UPDATE sees the rows as they were before it, so it never counts a made one twice.
    return f"""
    INSERT INTO {KEYS} (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT r.workspace_id, i.project_id, '{source.mode}', r.path,
           min((r.at AT TIME ZONE 'UTC')::date), max((r.at AT TIME ZONE 'UTC')::date), count(*)
    FROM ({rows}) r JOIN {ISSUES} i ON i.id = r.issue_id
    GROUP BY r.workspace_id, i.project_id, r.path
    ORDER BY r.workspace_id, i.project_id, r.path
    ON CONFLICT {KEY_COLUMNS} DO UPDATE
    SET first_day = LEAST({KEYS}.first_day, excluded.first_day),
        last_day = GREATEST({KEYS}.last_day, excluded.last_day),
        total = {KEYS}.total + excluded.total;

    WITH {_pg_by_day(source, rows)},
    {_pg_filled()}
    {_pg_counted("+")}
    """


def _pg_removal(source: Source, rows: str) -> str:
    return f"""
    PERFORM 1 FROM {KEYS} WHERE id IN (SELECT key_id FROM ({_pg_keyed(source, rows)}) y)
    ORDER BY id FOR UPDATE;

    UPDATE {KEYS} SET total = {KEYS}.total - y.n
    FROM (SELECT key_id, sum(n) AS n FROM ({_pg_keyed(source, rows)}) z GROUP BY key_id) y
    WHERE {KEYS}.id = y.key_id;

    WITH {_pg_by_day(source, rows)}
    {_pg_counted("-")}
    """


def _pg_rows(source: Source, ref: str) -> str:
    """A row (``OLD``/``NEW``) or a transition table, as the columns the SQL reads.

    The path in the keys' collation: a claim's is ``"C"`` (coordination 0011), and
    compared in it, a key could not be found by its index, only by reading them all."""
    path = 'path COLLATE "default"'
    if ref in ("OLD", "NEW"):
        return (
            f"SELECT {ref}.workspace_id AS workspace_id, {ref}.{source.issue} AS issue_id,"
            f" {ref}.{path} AS path, {ref}.{source.at} AS at"
        )
    return (
        f"SELECT workspace_id, {source.issue} AS issue_id, {path} AS path,"
        f" {source.at} AS at FROM {ref}"
    )


def _pg_function(name: str, body: str) -> str:
    return (
        f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        f"BEGIN\n{body}\nRETURN NULL;\nEND;\n$$"
    )


def postgresql(source: Source) -> Iterator[str]:
    moved = " OR ".join(
        f"OLD.{column} IS DISTINCT FROM NEW.{column}"
        for column in ("path", source.at, source.issue)
    )
    yield _pg_function(f"{source.name}_insert", _pg_insertion(source, _pg_rows(source, "new_rows")))
    yield _pg_function(f"{source.name}_delete", _pg_removal(source, _pg_rows(source, "old_rows")))
    yield _pg_function(
        f"{source.name}_update",
        _pg_removal(source, _pg_rows(source, "OLD"))
        + _pg_insertion(source, _pg_rows(source, "NEW")),
    )
    yield (
        f"CREATE TRIGGER {source.name}_insert AFTER INSERT ON {source.table}"
        f" REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT"
        f" EXECUTE FUNCTION {source.name}_insert()"
    )
    yield (
        f"CREATE TRIGGER {source.name}_delete AFTER DELETE ON {source.table}"
        f" REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT"
        f" EXECUTE FUNCTION {source.name}_delete()"
    )
    yield (
        f"CREATE TRIGGER {source.name}_update"
        f" AFTER UPDATE OF path, {source.at}, {source.issue} ON {source.table}"
        f" FOR EACH ROW WHEN ({moved}) EXECUTE FUNCTION {source.name}_update()"
    )


# --- SQLite: row by row ----------------------------------------------------------------


def _sqlite_key(source: Source, ref: str) -> str:
    return (
        f"(SELECT k.id FROM {KEYS} k WHERE k.workspace_id = {ref}.workspace_id"
        f" AND k.project_id = (SELECT project_id FROM {ISSUES} WHERE id = {ref}.{source.issue})"
        f" AND k.mode = '{source.mode}' AND k.path = {ref}.path)"
    )


def _sqlite_insertion(source: Source) -> str:
    day = f"date(NEW.{source.at})"
    key = _sqlite_key(source, "NEW")
    earlier = f"FROM {DAYS} WHERE key_id = x.id AND day < {day}"
    later = f"FROM {DAYS} WHERE key_id = x.id AND day > {day}"
    return f"""
    INSERT INTO {KEYS} (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT NEW.workspace_id, i.project_id, '{source.mode}', NEW.path, {day}, {day}, 1
    FROM {ISSUES} i WHERE i.id = NEW.{source.issue}
    ON CONFLICT {KEY_COLUMNS} DO UPDATE
    SET first_day = min(first_day, excluded.first_day),
        last_day = max(last_day, excluded.last_day), total = total + 1;

    INSERT INTO {DAYS} (key_id, day, n, before)
    WITH RECURSIVE x(id) AS (SELECT {key}),
    edge(id, start, stop, upto) AS (
        SELECT x.id,
               coalesce(date((SELECT max(day) {earlier}), '+1 day'), {day}),
               CASE WHEN EXISTS (SELECT 1 {earlier}) THEN {day}
                    ELSE coalesce(date((SELECT min(day) {later}), '-1 day'), {day}) END,
               coalesce((SELECT before + n {earlier} ORDER BY day DESC LIMIT 1), 0)
        FROM x  -- most events are of a day their key has: nothing to make
        WHERE NOT EXISTS (SELECT 1 FROM {DAYS} WHERE key_id = x.id AND day = {day})),
    gap(day) AS (
        SELECT start FROM edge UNION ALL
        SELECT date(gap.day, '+1 day') FROM gap, edge WHERE gap.day < edge.stop)
    SELECT edge.id, gap.day, 0, edge.upto FROM edge, gap WHERE true
    ON CONFLICT (key_id, day) DO NOTHING;

    UPDATE {DAYS} SET n = n + (day = {day}), before = before + (day > {day})
    WHERE key_id = {key} AND day >= {day};
    """


def _sqlite_removal(source: Source) -> str:
    day = f"date(OLD.{source.at})"
    key = _sqlite_key(source, "OLD")
    return f"""
    UPDATE {KEYS} SET total = total - 1 WHERE id = {key};
    UPDATE {DAYS} SET n = n - (day = {day}), before = before - (day > {day})
    WHERE key_id = {key} AND day >= {day};
    """


def sqlite(source: Source) -> Iterator[str]:
    moved = " OR ".join(
        f"OLD.{column} IS NOT NEW.{column}" for column in ("path", source.at, source.issue)
    )
    yield (
        f"CREATE TRIGGER {source.name}_insert AFTER INSERT ON {source.table}"
        f" FOR EACH ROW BEGIN {_sqlite_insertion(source)} END"
    )
    yield (
        f"CREATE TRIGGER {source.name}_delete AFTER DELETE ON {source.table}"
        f" FOR EACH ROW BEGIN {_sqlite_removal(source)} END"
    )
    yield (
        f"CREATE TRIGGER {source.name}_update"
        f" AFTER UPDATE OF path, {source.at}, {source.issue} ON {source.table}"
        f" FOR EACH ROW WHEN {moved}"
        f" BEGIN {_sqlite_removal(source)} {_sqlite_insertion(source)} END"
    )


# --- installing ------------------------------------------------------------------------


def creating(vendor: str) -> list[str]:
    make = postgresql if vendor == "postgresql" else sqlite
    return [statement for source in SOURCES for statement in make(source)]


def dropping(vendor: str) -> list[str]:
    statements = []
    for source in SOURCES:
        for event in ("insert", "delete", "update"):
            name = f"{source.name}_{event}"
            if vendor == "postgresql":
                statements.append(f"DROP TRIGGER IF EXISTS {name} ON {source.table}")
                statements.append(f"DROP FUNCTION IF EXISTS {name}()")
            else:
                statements.append(f"DROP TRIGGER IF EXISTS {name}")
    return statements


def install(connection: BaseDatabaseWrapper) -> None:
    """(Re)create every trigger on ``connection``'s database: the heatmap's and the
    health page's day counts' (``day_counts``)."""
    with connection.cursor() as cursor:
        for statement in (
            dropping(connection.vendor)
            + creating(connection.vendor)
            + day_counts.dropping(connection.vendor)
            + day_counts.creating(connection.vendor)
        ):
            cursor.execute(statement)


def uninstall(connection: BaseDatabaseWrapper) -> None:
    with connection.cursor() as cursor:
        for statement in dropping(connection.vendor) + day_counts.dropping(connection.vendor):
            cursor.execute(statement)
