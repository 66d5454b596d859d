"""PostgreSQL's rollup triggers again: a statement's missing days are made already
counted, so a bulk load writes each day row once, and a claim's path is compared in
the keys' collation, so its key is found by index, not by reading every key. The
rows they keep are the same. SQLite keeps 0004's.

The SQL is this migration's own, frozen as it was written (see 0002).
"""

from importlib import import_module

from django.db import migrations

# The rollups' triggers on PostgreSQL.
ROLLUPS = {
    "postgresql": [
        """CREATE OR REPLACE FUNCTION heatmap_rollup_claims_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN

    INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT r.workspace_id, i.project_id, 'claims', r.path,
           min((r.at AT TIME ZONE 'UTC')::date), max((r.at AT TIME ZONE 'UTC')::date), count(*)
    FROM (SELECT workspace_id, issue_id AS issue_id, path COLLATE "default" AS path, claimed_at AS at FROM new_rows) r JOIN coordination_issue i ON i.id = r.issue_id
    GROUP BY r.workspace_id, i.project_id, r.path
    ORDER BY r.workspace_id, i.project_id, r.path
    ON CONFLICT (workspace_id, project_id, mode, path) DO UPDATE
    SET first_day = LEAST(heatmap_rollup_keys.first_day, excluded.first_day),
        last_day = GREATEST(heatmap_rollup_keys.last_day, excluded.last_day),
        total = heatmap_rollup_keys.total + excluded.total;

    WITH 
    y AS (
        SELECT key_id, day, n, sum(n) OVER w AS upto,
               COALESCE(lead(day) OVER w, 'infinity') AS until
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, issue_id AS issue_id, path COLLATE "default" AS path, claimed_at AS at FROM new_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) z
        WINDOW w AS (PARTITION BY key_id ORDER BY day)),
    
    span AS (
        SELECT s.key_id, g.day,
               CASE WHEN f.day IS NULL OR g.day < f.day THEN 0 ELSE l.upto END AS had
        FROM (SELECT key_id, min(day) AS lo, max(day) AS hi FROM y GROUP BY key_id) s
        LEFT JOIN LATERAL (
            SELECT d.day FROM heatmap_rollup_days d WHERE d.key_id = s.key_id ORDER BY d.day LIMIT 1) f ON true
        LEFT JOIN LATERAL (
            SELECT d.day, d.before + d.n AS upto FROM heatmap_rollup_days d
            WHERE d.key_id = s.key_id ORDER BY d.day DESC LIMIT 1) l ON true
        CROSS JOIN LATERAL (
            -- Before its first row (or all of a new key's), then after its last.
            SELECT s.lo + i AS day FROM generate_series(0, COALESCE(f.day - 1, s.hi) - s.lo) i
            UNION ALL
            SELECT l.day + i FROM generate_series(1, s.hi - l.day) i) g),
    filled AS (
        INSERT INTO heatmap_rollup_days (key_id, day, n, before)
        SELECT key_id, day, n, had + upto - n FROM (
            -- The new events up to each missing day, from those of every new day.
            SELECT COALESCE(m.key_id, y.key_id) AS key_id, COALESCE(m.day, y.day) AS day,
                   m.had, COALESCE(y.n, 0) AS n,
                   sum(COALESCE(y.n, 0)) OVER (
                       PARTITION BY COALESCE(m.key_id, y.key_id)
                       ORDER BY COALESCE(m.day, y.day)) AS upto
            FROM span m FULL JOIN y ON y.key_id = m.key_id AND y.day = m.day) t
        WHERE had IS NOT NULL
        ORDER BY key_id, day)
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n + c.n, before = heatmap_rollup_days.before + c.later
    FROM (
        SELECT d.id, CASE WHEN d.day = y.day THEN y.n ELSE 0 END AS n,
               CASE WHEN d.day = y.day THEN y.upto - y.n ELSE y.upto END AS later
        FROM y JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day AND d.day < y.until
    ) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
RETURN NULL;
END;
$$""",
        """CREATE OR REPLACE FUNCTION heatmap_rollup_claims_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN

    PERFORM 1 FROM heatmap_rollup_keys WHERE id IN (SELECT key_id FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, issue_id AS issue_id, path COLLATE "default" AS path, claimed_at AS at FROM old_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) y)
    ORDER BY id FOR UPDATE;

    UPDATE heatmap_rollup_keys SET total = heatmap_rollup_keys.total - y.n
    FROM (SELECT key_id, sum(n) AS n FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, issue_id AS issue_id, path COLLATE "default" AS path, claimed_at AS at FROM old_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) z GROUP BY key_id) y
    WHERE heatmap_rollup_keys.id = y.key_id;

    WITH 
    y AS (
        SELECT key_id, day, n, sum(n) OVER w AS upto,
               COALESCE(lead(day) OVER w, 'infinity') AS until
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, issue_id AS issue_id, path COLLATE "default" AS path, claimed_at AS at FROM old_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) z
        WINDOW w AS (PARTITION BY key_id ORDER BY day))
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n - c.n, before = heatmap_rollup_days.before - c.later
    FROM (
        SELECT d.id, CASE WHEN d.day = y.day THEN y.n ELSE 0 END AS n,
               CASE WHEN d.day = y.day THEN y.upto - y.n ELSE y.upto END AS later
        FROM y JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day AND d.day < y.until
    ) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
RETURN NULL;
END;
$$""",
        """CREATE OR REPLACE FUNCTION heatmap_rollup_claims_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN

    PERFORM 1 FROM heatmap_rollup_keys WHERE id IN (SELECT key_id FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT OLD.workspace_id AS workspace_id, OLD.issue_id AS issue_id, OLD.path COLLATE "default" AS path, OLD.claimed_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) y)
    ORDER BY id FOR UPDATE;

    UPDATE heatmap_rollup_keys SET total = heatmap_rollup_keys.total - y.n
    FROM (SELECT key_id, sum(n) AS n FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT OLD.workspace_id AS workspace_id, OLD.issue_id AS issue_id, OLD.path COLLATE "default" AS path, OLD.claimed_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) z GROUP BY key_id) y
    WHERE heatmap_rollup_keys.id = y.key_id;

    WITH 
    y AS (
        SELECT key_id, day, n, sum(n) OVER w AS upto,
               COALESCE(lead(day) OVER w, 'infinity') AS until
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT OLD.workspace_id AS workspace_id, OLD.issue_id AS issue_id, OLD.path COLLATE "default" AS path, OLD.claimed_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) z
        WINDOW w AS (PARTITION BY key_id ORDER BY day))
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n - c.n, before = heatmap_rollup_days.before - c.later
    FROM (
        SELECT d.id, CASE WHEN d.day = y.day THEN y.n ELSE 0 END AS n,
               CASE WHEN d.day = y.day THEN y.upto - y.n ELSE y.upto END AS later
        FROM y JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day AND d.day < y.until
    ) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
    INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT r.workspace_id, i.project_id, 'claims', r.path,
           min((r.at AT TIME ZONE 'UTC')::date), max((r.at AT TIME ZONE 'UTC')::date), count(*)
    FROM (SELECT NEW.workspace_id AS workspace_id, NEW.issue_id AS issue_id, NEW.path COLLATE "default" AS path, NEW.claimed_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id
    GROUP BY r.workspace_id, i.project_id, r.path
    ORDER BY r.workspace_id, i.project_id, r.path
    ON CONFLICT (workspace_id, project_id, mode, path) DO UPDATE
    SET first_day = LEAST(heatmap_rollup_keys.first_day, excluded.first_day),
        last_day = GREATEST(heatmap_rollup_keys.last_day, excluded.last_day),
        total = heatmap_rollup_keys.total + excluded.total;

    WITH 
    y AS (
        SELECT key_id, day, n, sum(n) OVER w AS upto,
               COALESCE(lead(day) OVER w, 'infinity') AS until
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT NEW.workspace_id AS workspace_id, NEW.issue_id AS issue_id, NEW.path COLLATE "default" AS path, NEW.claimed_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) z
        WINDOW w AS (PARTITION BY key_id ORDER BY day)),
    
    span AS (
        SELECT s.key_id, g.day,
               CASE WHEN f.day IS NULL OR g.day < f.day THEN 0 ELSE l.upto END AS had
        FROM (SELECT key_id, min(day) AS lo, max(day) AS hi FROM y GROUP BY key_id) s
        LEFT JOIN LATERAL (
            SELECT d.day FROM heatmap_rollup_days d WHERE d.key_id = s.key_id ORDER BY d.day LIMIT 1) f ON true
        LEFT JOIN LATERAL (
            SELECT d.day, d.before + d.n AS upto FROM heatmap_rollup_days d
            WHERE d.key_id = s.key_id ORDER BY d.day DESC LIMIT 1) l ON true
        CROSS JOIN LATERAL (
            -- Before its first row (or all of a new key's), then after its last.
            SELECT s.lo + i AS day FROM generate_series(0, COALESCE(f.day - 1, s.hi) - s.lo) i
            UNION ALL
            SELECT l.day + i FROM generate_series(1, s.hi - l.day) i) g),
    filled AS (
        INSERT INTO heatmap_rollup_days (key_id, day, n, before)
        SELECT key_id, day, n, had + upto - n FROM (
            -- The new events up to each missing day, from those of every new day.
            SELECT COALESCE(m.key_id, y.key_id) AS key_id, COALESCE(m.day, y.day) AS day,
                   m.had, COALESCE(y.n, 0) AS n,
                   sum(COALESCE(y.n, 0)) OVER (
                       PARTITION BY COALESCE(m.key_id, y.key_id)
                       ORDER BY COALESCE(m.day, y.day)) AS upto
            FROM span m FULL JOIN y ON y.key_id = m.key_id AND y.day = m.day) t
        WHERE had IS NOT NULL
        ORDER BY key_id, day)
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n + c.n, before = heatmap_rollup_days.before + c.later
    FROM (
        SELECT d.id, CASE WHEN d.day = y.day THEN y.n ELSE 0 END AS n,
               CASE WHEN d.day = y.day THEN y.upto - y.n ELSE y.upto END AS later
        FROM y JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day AND d.day < y.until
    ) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
RETURN NULL;
END;
$$""",
        "CREATE TRIGGER heatmap_rollup_claims_insert AFTER INSERT ON issue_file_claims REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION heatmap_rollup_claims_insert()",
        "CREATE TRIGGER heatmap_rollup_claims_delete AFTER DELETE ON issue_file_claims REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION heatmap_rollup_claims_delete()",
        "CREATE TRIGGER heatmap_rollup_claims_update AFTER UPDATE OF path, claimed_at, issue_id ON issue_file_claims FOR EACH ROW WHEN (OLD.path IS DISTINCT FROM NEW.path OR OLD.claimed_at IS DISTINCT FROM NEW.claimed_at OR OLD.issue_id IS DISTINCT FROM NEW.issue_id) EXECUTE FUNCTION heatmap_rollup_claims_update()",
        """CREATE OR REPLACE FUNCTION heatmap_rollup_contention_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN

    INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT r.workspace_id, i.project_id, 'contention', r.path,
           min((r.at AT TIME ZONE 'UTC')::date), max((r.at AT TIME ZONE 'UTC')::date), count(*)
    FROM (SELECT workspace_id, rejected_issue_id AS issue_id, path COLLATE "default" AS path, occurred_at AS at FROM new_rows) r JOIN coordination_issue i ON i.id = r.issue_id
    GROUP BY r.workspace_id, i.project_id, r.path
    ORDER BY r.workspace_id, i.project_id, r.path
    ON CONFLICT (workspace_id, project_id, mode, path) DO UPDATE
    SET first_day = LEAST(heatmap_rollup_keys.first_day, excluded.first_day),
        last_day = GREATEST(heatmap_rollup_keys.last_day, excluded.last_day),
        total = heatmap_rollup_keys.total + excluded.total;

    WITH 
    y AS (
        SELECT key_id, day, n, sum(n) OVER w AS upto,
               COALESCE(lead(day) OVER w, 'infinity') AS until
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, rejected_issue_id AS issue_id, path COLLATE "default" AS path, occurred_at AS at FROM new_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) z
        WINDOW w AS (PARTITION BY key_id ORDER BY day)),
    
    span AS (
        SELECT s.key_id, g.day,
               CASE WHEN f.day IS NULL OR g.day < f.day THEN 0 ELSE l.upto END AS had
        FROM (SELECT key_id, min(day) AS lo, max(day) AS hi FROM y GROUP BY key_id) s
        LEFT JOIN LATERAL (
            SELECT d.day FROM heatmap_rollup_days d WHERE d.key_id = s.key_id ORDER BY d.day LIMIT 1) f ON true
        LEFT JOIN LATERAL (
            SELECT d.day, d.before + d.n AS upto FROM heatmap_rollup_days d
            WHERE d.key_id = s.key_id ORDER BY d.day DESC LIMIT 1) l ON true
        CROSS JOIN LATERAL (
            -- Before its first row (or all of a new key's), then after its last.
            SELECT s.lo + i AS day FROM generate_series(0, COALESCE(f.day - 1, s.hi) - s.lo) i
            UNION ALL
            SELECT l.day + i FROM generate_series(1, s.hi - l.day) i) g),
    filled AS (
        INSERT INTO heatmap_rollup_days (key_id, day, n, before)
        SELECT key_id, day, n, had + upto - n FROM (
            -- The new events up to each missing day, from those of every new day.
            SELECT COALESCE(m.key_id, y.key_id) AS key_id, COALESCE(m.day, y.day) AS day,
                   m.had, COALESCE(y.n, 0) AS n,
                   sum(COALESCE(y.n, 0)) OVER (
                       PARTITION BY COALESCE(m.key_id, y.key_id)
                       ORDER BY COALESCE(m.day, y.day)) AS upto
            FROM span m FULL JOIN y ON y.key_id = m.key_id AND y.day = m.day) t
        WHERE had IS NOT NULL
        ORDER BY key_id, day)
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n + c.n, before = heatmap_rollup_days.before + c.later
    FROM (
        SELECT d.id, CASE WHEN d.day = y.day THEN y.n ELSE 0 END AS n,
               CASE WHEN d.day = y.day THEN y.upto - y.n ELSE y.upto END AS later
        FROM y JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day AND d.day < y.until
    ) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
RETURN NULL;
END;
$$""",
        """CREATE OR REPLACE FUNCTION heatmap_rollup_contention_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN

    PERFORM 1 FROM heatmap_rollup_keys WHERE id IN (SELECT key_id FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, rejected_issue_id AS issue_id, path COLLATE "default" AS path, occurred_at AS at FROM old_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) y)
    ORDER BY id FOR UPDATE;

    UPDATE heatmap_rollup_keys SET total = heatmap_rollup_keys.total - y.n
    FROM (SELECT key_id, sum(n) AS n FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, rejected_issue_id AS issue_id, path COLLATE "default" AS path, occurred_at AS at FROM old_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) z GROUP BY key_id) y
    WHERE heatmap_rollup_keys.id = y.key_id;

    WITH 
    y AS (
        SELECT key_id, day, n, sum(n) OVER w AS upto,
               COALESCE(lead(day) OVER w, 'infinity') AS until
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, rejected_issue_id AS issue_id, path COLLATE "default" AS path, occurred_at AS at FROM old_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) z
        WINDOW w AS (PARTITION BY key_id ORDER BY day))
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n - c.n, before = heatmap_rollup_days.before - c.later
    FROM (
        SELECT d.id, CASE WHEN d.day = y.day THEN y.n ELSE 0 END AS n,
               CASE WHEN d.day = y.day THEN y.upto - y.n ELSE y.upto END AS later
        FROM y JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day AND d.day < y.until
    ) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
RETURN NULL;
END;
$$""",
        """CREATE OR REPLACE FUNCTION heatmap_rollup_contention_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN

    PERFORM 1 FROM heatmap_rollup_keys WHERE id IN (SELECT key_id FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT OLD.workspace_id AS workspace_id, OLD.rejected_issue_id AS issue_id, OLD.path COLLATE "default" AS path, OLD.occurred_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) y)
    ORDER BY id FOR UPDATE;

    UPDATE heatmap_rollup_keys SET total = heatmap_rollup_keys.total - y.n
    FROM (SELECT key_id, sum(n) AS n FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT OLD.workspace_id AS workspace_id, OLD.rejected_issue_id AS issue_id, OLD.path COLLATE "default" AS path, OLD.occurred_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) z GROUP BY key_id) y
    WHERE heatmap_rollup_keys.id = y.key_id;

    WITH 
    y AS (
        SELECT key_id, day, n, sum(n) OVER w AS upto,
               COALESCE(lead(day) OVER w, 'infinity') AS until
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT OLD.workspace_id AS workspace_id, OLD.rejected_issue_id AS issue_id, OLD.path COLLATE "default" AS path, OLD.occurred_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) z
        WINDOW w AS (PARTITION BY key_id ORDER BY day))
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n - c.n, before = heatmap_rollup_days.before - c.later
    FROM (
        SELECT d.id, CASE WHEN d.day = y.day THEN y.n ELSE 0 END AS n,
               CASE WHEN d.day = y.day THEN y.upto - y.n ELSE y.upto END AS later
        FROM y JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day AND d.day < y.until
    ) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
    INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT r.workspace_id, i.project_id, 'contention', r.path,
           min((r.at AT TIME ZONE 'UTC')::date), max((r.at AT TIME ZONE 'UTC')::date), count(*)
    FROM (SELECT NEW.workspace_id AS workspace_id, NEW.rejected_issue_id AS issue_id, NEW.path COLLATE "default" AS path, NEW.occurred_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id
    GROUP BY r.workspace_id, i.project_id, r.path
    ORDER BY r.workspace_id, i.project_id, r.path
    ON CONFLICT (workspace_id, project_id, mode, path) DO UPDATE
    SET first_day = LEAST(heatmap_rollup_keys.first_day, excluded.first_day),
        last_day = GREATEST(heatmap_rollup_keys.last_day, excluded.last_day),
        total = heatmap_rollup_keys.total + excluded.total;

    WITH 
    y AS (
        SELECT key_id, day, n, sum(n) OVER w AS upto,
               COALESCE(lead(day) OVER w, 'infinity') AS until
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT NEW.workspace_id AS workspace_id, NEW.rejected_issue_id AS issue_id, NEW.path COLLATE "default" AS path, NEW.occurred_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) z
        WINDOW w AS (PARTITION BY key_id ORDER BY day)),
    
    span AS (
        SELECT s.key_id, g.day,
               CASE WHEN f.day IS NULL OR g.day < f.day THEN 0 ELSE l.upto END AS had
        FROM (SELECT key_id, min(day) AS lo, max(day) AS hi FROM y GROUP BY key_id) s
        LEFT JOIN LATERAL (
            SELECT d.day FROM heatmap_rollup_days d WHERE d.key_id = s.key_id ORDER BY d.day LIMIT 1) f ON true
        LEFT JOIN LATERAL (
            SELECT d.day, d.before + d.n AS upto FROM heatmap_rollup_days d
            WHERE d.key_id = s.key_id ORDER BY d.day DESC LIMIT 1) l ON true
        CROSS JOIN LATERAL (
            -- Before its first row (or all of a new key's), then after its last.
            SELECT s.lo + i AS day FROM generate_series(0, COALESCE(f.day - 1, s.hi) - s.lo) i
            UNION ALL
            SELECT l.day + i FROM generate_series(1, s.hi - l.day) i) g),
    filled AS (
        INSERT INTO heatmap_rollup_days (key_id, day, n, before)
        SELECT key_id, day, n, had + upto - n FROM (
            -- The new events up to each missing day, from those of every new day.
            SELECT COALESCE(m.key_id, y.key_id) AS key_id, COALESCE(m.day, y.day) AS day,
                   m.had, COALESCE(y.n, 0) AS n,
                   sum(COALESCE(y.n, 0)) OVER (
                       PARTITION BY COALESCE(m.key_id, y.key_id)
                       ORDER BY COALESCE(m.day, y.day)) AS upto
            FROM span m FULL JOIN y ON y.key_id = m.key_id AND y.day = m.day) t
        WHERE had IS NOT NULL
        ORDER BY key_id, day)
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n + c.n, before = heatmap_rollup_days.before + c.later
    FROM (
        SELECT d.id, CASE WHEN d.day = y.day THEN y.n ELSE 0 END AS n,
               CASE WHEN d.day = y.day THEN y.upto - y.n ELSE y.upto END AS later
        FROM y JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day AND d.day < y.until
    ) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
RETURN NULL;
END;
$$""",
        "CREATE TRIGGER heatmap_rollup_contention_insert AFTER INSERT ON claim_conflicts REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION heatmap_rollup_contention_insert()",
        "CREATE TRIGGER heatmap_rollup_contention_delete AFTER DELETE ON claim_conflicts REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION heatmap_rollup_contention_delete()",
        "CREATE TRIGGER heatmap_rollup_contention_update AFTER UPDATE OF path, occurred_at, rejected_issue_id ON claim_conflicts FOR EACH ROW WHEN (OLD.path IS DISTINCT FROM NEW.path OR OLD.occurred_at IS DISTINCT FROM NEW.occurred_at OR OLD.rejected_issue_id IS DISTINCT FROM NEW.rejected_issue_id) EXECUTE FUNCTION heatmap_rollup_contention_update()",
    ],
    "sqlite": [],  # 0004's, unchanged
}



def run(schema_editor, statements):
    for statement in statements:
        schema_editor.execute(statement, params=None)


def rollups(name):
    return import_module(f"heatmap.migrations.{name}")


def reinstall(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if ROLLUPS[vendor]:
        run(schema_editor, rollups("0002_rollup_totals").DROPPING[vendor] + ROLLUPS[vendor])


def reinstall_previous(apps, schema_editor):
    """Back at 0004, its triggers (on PostgreSQL, 0003's): they keep the same rows."""
    vendor = schema_editor.connection.vendor
    if ROLLUPS[vendor]:
        run(
            schema_editor,
            rollups("0002_rollup_totals").DROPPING[vendor]
            + rollups("0003_gap_free_days").TRIGGERS[vendor],
        )


class Migration(migrations.Migration):
    dependencies = [
        ("heatmap", "0004_day_counts"),
    ]

    operations = [migrations.RunPython(reinstall, reinstall_previous)]
