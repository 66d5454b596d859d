"""Every key gets a row for every day from its first to its last (so a window's start
is one range of the (day, key) index): the triggers that keep them so, then those rows
for the history so far.

The SQL is this migration's own, frozen as it was written (see 0002).
"""

from importlib import import_module

from django.db import migrations, models

# The triggers on claims and conflicts: the rows a key lacks up to an event's day are
# made before it is counted.
TRIGGERS = {
    "postgresql": [
        """CREATE OR REPLACE FUNCTION heatmap_rollup_claims_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN

    INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT r.workspace_id, i.project_id, 'claims', r.path,
           min((r.at AT TIME ZONE 'UTC')::date), max((r.at AT TIME ZONE 'UTC')::date), count(*)
    FROM (SELECT workspace_id, issue_id AS issue_id, path, claimed_at AS at FROM new_rows) r JOIN coordination_issue i ON i.id = r.issue_id
    GROUP BY r.workspace_id, i.project_id, r.path
    ORDER BY r.workspace_id, i.project_id, r.path
    ON CONFLICT (workspace_id, project_id, mode, path) DO UPDATE
    SET first_day = LEAST(heatmap_rollup_keys.first_day, excluded.first_day),
        last_day = GREATEST(heatmap_rollup_keys.last_day, excluded.last_day),
        total = heatmap_rollup_keys.total + excluded.total;
    
    INSERT INTO heatmap_rollup_days (key_id, day, n, before)
    SELECT DISTINCT y.key_id, g.day, 0, COALESCE(l.upto, 0)
    FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, issue_id AS issue_id, path, claimed_at AS at FROM new_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) y
    LEFT JOIN LATERAL (
        SELECT d.day, d.before + d.n AS upto FROM heatmap_rollup_days d
        WHERE d.key_id = y.key_id AND d.day < y.day ORDER BY d.day DESC LIMIT 1) l ON true
    LEFT JOIN LATERAL (
        SELECT d.day FROM heatmap_rollup_days d
        WHERE d.key_id = y.key_id AND d.day > y.day ORDER BY d.day LIMIT 1) h
        ON l.day IS NULL
    CROSS JOIN LATERAL (
        SELECT COALESCE(l.day + 1, y.day) + i AS day
        FROM generate_series(0, COALESCE(h.day - 1, y.day) - COALESCE(l.day + 1, y.day)) i) g
    ORDER BY y.key_id, g.day
    ON CONFLICT (key_id, day) DO NOTHING;
    
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n + c.n, before = heatmap_rollup_days.before + c.later
    FROM (
        SELECT d.id, COALESCE(sum(y.n) FILTER (WHERE d.day = y.day), 0) AS n,
               COALESCE(sum(y.n) FILTER (WHERE d.day > y.day), 0) AS later
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, issue_id AS issue_id, path, claimed_at AS at FROM new_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) y
        JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day GROUP BY d.id) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
RETURN NULL;
END;
$$""",
        """CREATE OR REPLACE FUNCTION heatmap_rollup_claims_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN

    PERFORM 1 FROM heatmap_rollup_keys WHERE id IN (SELECT key_id FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, issue_id AS issue_id, path, claimed_at AS at FROM old_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) y)
    ORDER BY id FOR UPDATE;

    UPDATE heatmap_rollup_keys SET total = heatmap_rollup_keys.total - y.n
    FROM (SELECT key_id, sum(n) AS n FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, issue_id AS issue_id, path, claimed_at AS at FROM old_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) z GROUP BY key_id) y
    WHERE heatmap_rollup_keys.id = y.key_id;
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n - c.n, before = heatmap_rollup_days.before - c.later
    FROM (
        SELECT d.id, COALESCE(sum(y.n) FILTER (WHERE d.day = y.day), 0) AS n,
               COALESCE(sum(y.n) FILTER (WHERE d.day > y.day), 0) AS later
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, issue_id AS issue_id, path, claimed_at AS at FROM old_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) y
        JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day GROUP BY d.id) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
RETURN NULL;
END;
$$""",
        """CREATE OR REPLACE FUNCTION heatmap_rollup_claims_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN

    PERFORM 1 FROM heatmap_rollup_keys WHERE id IN (SELECT key_id FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT OLD.workspace_id AS workspace_id, OLD.issue_id AS issue_id, OLD.path AS path, OLD.claimed_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) y)
    ORDER BY id FOR UPDATE;

    UPDATE heatmap_rollup_keys SET total = heatmap_rollup_keys.total - y.n
    FROM (SELECT key_id, sum(n) AS n FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT OLD.workspace_id AS workspace_id, OLD.issue_id AS issue_id, OLD.path AS path, OLD.claimed_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) z GROUP BY key_id) y
    WHERE heatmap_rollup_keys.id = y.key_id;
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n - c.n, before = heatmap_rollup_days.before - c.later
    FROM (
        SELECT d.id, COALESCE(sum(y.n) FILTER (WHERE d.day = y.day), 0) AS n,
               COALESCE(sum(y.n) FILTER (WHERE d.day > y.day), 0) AS later
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT OLD.workspace_id AS workspace_id, OLD.issue_id AS issue_id, OLD.path AS path, OLD.claimed_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) y
        JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day GROUP BY d.id) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
    INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT r.workspace_id, i.project_id, 'claims', r.path,
           min((r.at AT TIME ZONE 'UTC')::date), max((r.at AT TIME ZONE 'UTC')::date), count(*)
    FROM (SELECT NEW.workspace_id AS workspace_id, NEW.issue_id AS issue_id, NEW.path AS path, NEW.claimed_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id
    GROUP BY r.workspace_id, i.project_id, r.path
    ORDER BY r.workspace_id, i.project_id, r.path
    ON CONFLICT (workspace_id, project_id, mode, path) DO UPDATE
    SET first_day = LEAST(heatmap_rollup_keys.first_day, excluded.first_day),
        last_day = GREATEST(heatmap_rollup_keys.last_day, excluded.last_day),
        total = heatmap_rollup_keys.total + excluded.total;
    
    INSERT INTO heatmap_rollup_days (key_id, day, n, before)
    SELECT DISTINCT y.key_id, g.day, 0, COALESCE(l.upto, 0)
    FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT NEW.workspace_id AS workspace_id, NEW.issue_id AS issue_id, NEW.path AS path, NEW.claimed_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) y
    LEFT JOIN LATERAL (
        SELECT d.day, d.before + d.n AS upto FROM heatmap_rollup_days d
        WHERE d.key_id = y.key_id AND d.day < y.day ORDER BY d.day DESC LIMIT 1) l ON true
    LEFT JOIN LATERAL (
        SELECT d.day FROM heatmap_rollup_days d
        WHERE d.key_id = y.key_id AND d.day > y.day ORDER BY d.day LIMIT 1) h
        ON l.day IS NULL
    CROSS JOIN LATERAL (
        SELECT COALESCE(l.day + 1, y.day) + i AS day
        FROM generate_series(0, COALESCE(h.day - 1, y.day) - COALESCE(l.day + 1, y.day)) i) g
    ORDER BY y.key_id, g.day
    ON CONFLICT (key_id, day) DO NOTHING;
    
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n + c.n, before = heatmap_rollup_days.before + c.later
    FROM (
        SELECT d.id, COALESCE(sum(y.n) FILTER (WHERE d.day = y.day), 0) AS n,
               COALESCE(sum(y.n) FILTER (WHERE d.day > y.day), 0) AS later
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT NEW.workspace_id AS workspace_id, NEW.issue_id AS issue_id, NEW.path AS path, NEW.claimed_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'claims' AND k.path = x.path) y
        JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day GROUP BY d.id) c
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
    FROM (SELECT workspace_id, rejected_issue_id AS issue_id, path, occurred_at AS at FROM new_rows) r JOIN coordination_issue i ON i.id = r.issue_id
    GROUP BY r.workspace_id, i.project_id, r.path
    ORDER BY r.workspace_id, i.project_id, r.path
    ON CONFLICT (workspace_id, project_id, mode, path) DO UPDATE
    SET first_day = LEAST(heatmap_rollup_keys.first_day, excluded.first_day),
        last_day = GREATEST(heatmap_rollup_keys.last_day, excluded.last_day),
        total = heatmap_rollup_keys.total + excluded.total;
    
    INSERT INTO heatmap_rollup_days (key_id, day, n, before)
    SELECT DISTINCT y.key_id, g.day, 0, COALESCE(l.upto, 0)
    FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, rejected_issue_id AS issue_id, path, occurred_at AS at FROM new_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) y
    LEFT JOIN LATERAL (
        SELECT d.day, d.before + d.n AS upto FROM heatmap_rollup_days d
        WHERE d.key_id = y.key_id AND d.day < y.day ORDER BY d.day DESC LIMIT 1) l ON true
    LEFT JOIN LATERAL (
        SELECT d.day FROM heatmap_rollup_days d
        WHERE d.key_id = y.key_id AND d.day > y.day ORDER BY d.day LIMIT 1) h
        ON l.day IS NULL
    CROSS JOIN LATERAL (
        SELECT COALESCE(l.day + 1, y.day) + i AS day
        FROM generate_series(0, COALESCE(h.day - 1, y.day) - COALESCE(l.day + 1, y.day)) i) g
    ORDER BY y.key_id, g.day
    ON CONFLICT (key_id, day) DO NOTHING;
    
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n + c.n, before = heatmap_rollup_days.before + c.later
    FROM (
        SELECT d.id, COALESCE(sum(y.n) FILTER (WHERE d.day = y.day), 0) AS n,
               COALESCE(sum(y.n) FILTER (WHERE d.day > y.day), 0) AS later
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, rejected_issue_id AS issue_id, path, occurred_at AS at FROM new_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) y
        JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day GROUP BY d.id) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
RETURN NULL;
END;
$$""",
        """CREATE OR REPLACE FUNCTION heatmap_rollup_contention_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN

    PERFORM 1 FROM heatmap_rollup_keys WHERE id IN (SELECT key_id FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, rejected_issue_id AS issue_id, path, occurred_at AS at FROM old_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) y)
    ORDER BY id FOR UPDATE;

    UPDATE heatmap_rollup_keys SET total = heatmap_rollup_keys.total - y.n
    FROM (SELECT key_id, sum(n) AS n FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, rejected_issue_id AS issue_id, path, occurred_at AS at FROM old_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) z GROUP BY key_id) y
    WHERE heatmap_rollup_keys.id = y.key_id;
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n - c.n, before = heatmap_rollup_days.before - c.later
    FROM (
        SELECT d.id, COALESCE(sum(y.n) FILTER (WHERE d.day = y.day), 0) AS n,
               COALESCE(sum(y.n) FILTER (WHERE d.day > y.day), 0) AS later
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT workspace_id, rejected_issue_id AS issue_id, path, occurred_at AS at FROM old_rows) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) y
        JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day GROUP BY d.id) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
RETURN NULL;
END;
$$""",
        """CREATE OR REPLACE FUNCTION heatmap_rollup_contention_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN

    PERFORM 1 FROM heatmap_rollup_keys WHERE id IN (SELECT key_id FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT OLD.workspace_id AS workspace_id, OLD.rejected_issue_id AS issue_id, OLD.path AS path, OLD.occurred_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) y)
    ORDER BY id FOR UPDATE;

    UPDATE heatmap_rollup_keys SET total = heatmap_rollup_keys.total - y.n
    FROM (SELECT key_id, sum(n) AS n FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT OLD.workspace_id AS workspace_id, OLD.rejected_issue_id AS issue_id, OLD.path AS path, OLD.occurred_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) z GROUP BY key_id) y
    WHERE heatmap_rollup_keys.id = y.key_id;
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n - c.n, before = heatmap_rollup_days.before - c.later
    FROM (
        SELECT d.id, COALESCE(sum(y.n) FILTER (WHERE d.day = y.day), 0) AS n,
               COALESCE(sum(y.n) FILTER (WHERE d.day > y.day), 0) AS later
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT OLD.workspace_id AS workspace_id, OLD.rejected_issue_id AS issue_id, OLD.path AS path, OLD.occurred_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) y
        JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day GROUP BY d.id) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
    INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT r.workspace_id, i.project_id, 'contention', r.path,
           min((r.at AT TIME ZONE 'UTC')::date), max((r.at AT TIME ZONE 'UTC')::date), count(*)
    FROM (SELECT NEW.workspace_id AS workspace_id, NEW.rejected_issue_id AS issue_id, NEW.path AS path, NEW.occurred_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id
    GROUP BY r.workspace_id, i.project_id, r.path
    ORDER BY r.workspace_id, i.project_id, r.path
    ON CONFLICT (workspace_id, project_id, mode, path) DO UPDATE
    SET first_day = LEAST(heatmap_rollup_keys.first_day, excluded.first_day),
        last_day = GREATEST(heatmap_rollup_keys.last_day, excluded.last_day),
        total = heatmap_rollup_keys.total + excluded.total;
    
    INSERT INTO heatmap_rollup_days (key_id, day, n, before)
    SELECT DISTINCT y.key_id, g.day, 0, COALESCE(l.upto, 0)
    FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT NEW.workspace_id AS workspace_id, NEW.rejected_issue_id AS issue_id, NEW.path AS path, NEW.occurred_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) y
    LEFT JOIN LATERAL (
        SELECT d.day, d.before + d.n AS upto FROM heatmap_rollup_days d
        WHERE d.key_id = y.key_id AND d.day < y.day ORDER BY d.day DESC LIMIT 1) l ON true
    LEFT JOIN LATERAL (
        SELECT d.day FROM heatmap_rollup_days d
        WHERE d.key_id = y.key_id AND d.day > y.day ORDER BY d.day LIMIT 1) h
        ON l.day IS NULL
    CROSS JOIN LATERAL (
        SELECT COALESCE(l.day + 1, y.day) + i AS day
        FROM generate_series(0, COALESCE(h.day - 1, y.day) - COALESCE(l.day + 1, y.day)) i) g
    ORDER BY y.key_id, g.day
    ON CONFLICT (key_id, day) DO NOTHING;
    
    
    UPDATE heatmap_rollup_days SET n = heatmap_rollup_days.n + c.n, before = heatmap_rollup_days.before + c.later
    FROM (
        SELECT d.id, COALESCE(sum(y.n) FILTER (WHERE d.day = y.day), 0) AS n,
               COALESCE(sum(y.n) FILTER (WHERE d.day > y.day), 0) AS later
        FROM (SELECT k.id AS key_id, x.day, x.n FROM ( SELECT r.workspace_id, i.project_id, r.path, (r.at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM (SELECT NEW.workspace_id AS workspace_id, NEW.rejected_issue_id AS issue_id, NEW.path AS path, NEW.occurred_at AS at) r JOIN coordination_issue i ON i.id = r.issue_id GROUP BY 1, 2, 3, 4) x JOIN heatmap_rollup_keys k ON k.workspace_id = x.workspace_id AND k.project_id = x.project_id AND k.mode = 'contention' AND k.path = x.path) y
        JOIN heatmap_rollup_days d ON d.key_id = y.key_id AND d.day >= y.day GROUP BY d.id) c
    WHERE heatmap_rollup_days.id = c.id;
    
    
RETURN NULL;
END;
$$""",
        "CREATE TRIGGER heatmap_rollup_contention_insert AFTER INSERT ON claim_conflicts REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION heatmap_rollup_contention_insert()",
        "CREATE TRIGGER heatmap_rollup_contention_delete AFTER DELETE ON claim_conflicts REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION heatmap_rollup_contention_delete()",
        "CREATE TRIGGER heatmap_rollup_contention_update AFTER UPDATE OF path, occurred_at, rejected_issue_id ON claim_conflicts FOR EACH ROW WHEN (OLD.path IS DISTINCT FROM NEW.path OR OLD.occurred_at IS DISTINCT FROM NEW.occurred_at OR OLD.rejected_issue_id IS DISTINCT FROM NEW.rejected_issue_id) EXECUTE FUNCTION heatmap_rollup_contention_update()",
    ],
    "sqlite": [
        """CREATE TRIGGER heatmap_rollup_claims_insert AFTER INSERT ON issue_file_claims FOR EACH ROW BEGIN 
    INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT NEW.workspace_id, i.project_id, 'claims', NEW.path, date(NEW.claimed_at), date(NEW.claimed_at), 1
    FROM coordination_issue i WHERE i.id = NEW.issue_id
    ON CONFLICT (workspace_id, project_id, mode, path) DO UPDATE
    SET first_day = min(first_day, excluded.first_day),
        last_day = max(last_day, excluded.last_day), total = total + 1;

    INSERT INTO heatmap_rollup_days (key_id, day, n, before)
    WITH RECURSIVE x(id) AS (SELECT (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = NEW.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = NEW.issue_id) AND k.mode = 'claims' AND k.path = NEW.path)),
    edge(id, start, stop, upto) AS (
        SELECT x.id,
               coalesce(date((SELECT max(day) FROM heatmap_rollup_days WHERE key_id = x.id AND day < date(NEW.claimed_at)), '+1 day'), date(NEW.claimed_at)),
               CASE WHEN EXISTS (SELECT 1 FROM heatmap_rollup_days WHERE key_id = x.id AND day < date(NEW.claimed_at)) THEN date(NEW.claimed_at)
                    ELSE coalesce(date((SELECT min(day) FROM heatmap_rollup_days WHERE key_id = x.id AND day > date(NEW.claimed_at)), '-1 day'), date(NEW.claimed_at)) END,
               coalesce((SELECT before + n FROM heatmap_rollup_days WHERE key_id = x.id AND day < date(NEW.claimed_at) ORDER BY day DESC LIMIT 1), 0)
        FROM x),
    gap(day) AS (
        SELECT start FROM edge UNION ALL
        SELECT date(gap.day, '+1 day') FROM gap, edge WHERE gap.day < edge.stop)
    SELECT edge.id, gap.day, 0, edge.upto FROM edge, gap WHERE true
    ON CONFLICT (key_id, day) DO NOTHING;

    UPDATE heatmap_rollup_days SET n = n + (day = date(NEW.claimed_at)), before = before + (day > date(NEW.claimed_at))
    WHERE key_id = (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = NEW.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = NEW.issue_id) AND k.mode = 'claims' AND k.path = NEW.path) AND day >= date(NEW.claimed_at);
     END""",
        """CREATE TRIGGER heatmap_rollup_claims_delete AFTER DELETE ON issue_file_claims FOR EACH ROW BEGIN 
    UPDATE heatmap_rollup_keys SET total = total - 1 WHERE id = (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = OLD.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = OLD.issue_id) AND k.mode = 'claims' AND k.path = OLD.path);
    UPDATE heatmap_rollup_days SET n = n - (day = date(OLD.claimed_at)), before = before - (day > date(OLD.claimed_at))
    WHERE key_id = (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = OLD.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = OLD.issue_id) AND k.mode = 'claims' AND k.path = OLD.path) AND day >= date(OLD.claimed_at);
     END""",
        """CREATE TRIGGER heatmap_rollup_claims_update AFTER UPDATE OF path, claimed_at, issue_id ON issue_file_claims FOR EACH ROW WHEN OLD.path IS NOT NEW.path OR OLD.claimed_at IS NOT NEW.claimed_at OR OLD.issue_id IS NOT NEW.issue_id BEGIN 
    UPDATE heatmap_rollup_keys SET total = total - 1 WHERE id = (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = OLD.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = OLD.issue_id) AND k.mode = 'claims' AND k.path = OLD.path);
    UPDATE heatmap_rollup_days SET n = n - (day = date(OLD.claimed_at)), before = before - (day > date(OLD.claimed_at))
    WHERE key_id = (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = OLD.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = OLD.issue_id) AND k.mode = 'claims' AND k.path = OLD.path) AND day >= date(OLD.claimed_at);
     
    INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT NEW.workspace_id, i.project_id, 'claims', NEW.path, date(NEW.claimed_at), date(NEW.claimed_at), 1
    FROM coordination_issue i WHERE i.id = NEW.issue_id
    ON CONFLICT (workspace_id, project_id, mode, path) DO UPDATE
    SET first_day = min(first_day, excluded.first_day),
        last_day = max(last_day, excluded.last_day), total = total + 1;

    INSERT INTO heatmap_rollup_days (key_id, day, n, before)
    WITH RECURSIVE x(id) AS (SELECT (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = NEW.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = NEW.issue_id) AND k.mode = 'claims' AND k.path = NEW.path)),
    edge(id, start, stop, upto) AS (
        SELECT x.id,
               coalesce(date((SELECT max(day) FROM heatmap_rollup_days WHERE key_id = x.id AND day < date(NEW.claimed_at)), '+1 day'), date(NEW.claimed_at)),
               CASE WHEN EXISTS (SELECT 1 FROM heatmap_rollup_days WHERE key_id = x.id AND day < date(NEW.claimed_at)) THEN date(NEW.claimed_at)
                    ELSE coalesce(date((SELECT min(day) FROM heatmap_rollup_days WHERE key_id = x.id AND day > date(NEW.claimed_at)), '-1 day'), date(NEW.claimed_at)) END,
               coalesce((SELECT before + n FROM heatmap_rollup_days WHERE key_id = x.id AND day < date(NEW.claimed_at) ORDER BY day DESC LIMIT 1), 0)
        FROM x),
    gap(day) AS (
        SELECT start FROM edge UNION ALL
        SELECT date(gap.day, '+1 day') FROM gap, edge WHERE gap.day < edge.stop)
    SELECT edge.id, gap.day, 0, edge.upto FROM edge, gap WHERE true
    ON CONFLICT (key_id, day) DO NOTHING;

    UPDATE heatmap_rollup_days SET n = n + (day = date(NEW.claimed_at)), before = before + (day > date(NEW.claimed_at))
    WHERE key_id = (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = NEW.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = NEW.issue_id) AND k.mode = 'claims' AND k.path = NEW.path) AND day >= date(NEW.claimed_at);
     END""",
        """CREATE TRIGGER heatmap_rollup_contention_insert AFTER INSERT ON claim_conflicts FOR EACH ROW BEGIN 
    INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT NEW.workspace_id, i.project_id, 'contention', NEW.path, date(NEW.occurred_at), date(NEW.occurred_at), 1
    FROM coordination_issue i WHERE i.id = NEW.rejected_issue_id
    ON CONFLICT (workspace_id, project_id, mode, path) DO UPDATE
    SET first_day = min(first_day, excluded.first_day),
        last_day = max(last_day, excluded.last_day), total = total + 1;

    INSERT INTO heatmap_rollup_days (key_id, day, n, before)
    WITH RECURSIVE x(id) AS (SELECT (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = NEW.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = NEW.rejected_issue_id) AND k.mode = 'contention' AND k.path = NEW.path)),
    edge(id, start, stop, upto) AS (
        SELECT x.id,
               coalesce(date((SELECT max(day) FROM heatmap_rollup_days WHERE key_id = x.id AND day < date(NEW.occurred_at)), '+1 day'), date(NEW.occurred_at)),
               CASE WHEN EXISTS (SELECT 1 FROM heatmap_rollup_days WHERE key_id = x.id AND day < date(NEW.occurred_at)) THEN date(NEW.occurred_at)
                    ELSE coalesce(date((SELECT min(day) FROM heatmap_rollup_days WHERE key_id = x.id AND day > date(NEW.occurred_at)), '-1 day'), date(NEW.occurred_at)) END,
               coalesce((SELECT before + n FROM heatmap_rollup_days WHERE key_id = x.id AND day < date(NEW.occurred_at) ORDER BY day DESC LIMIT 1), 0)
        FROM x),
    gap(day) AS (
        SELECT start FROM edge UNION ALL
        SELECT date(gap.day, '+1 day') FROM gap, edge WHERE gap.day < edge.stop)
    SELECT edge.id, gap.day, 0, edge.upto FROM edge, gap WHERE true
    ON CONFLICT (key_id, day) DO NOTHING;

    UPDATE heatmap_rollup_days SET n = n + (day = date(NEW.occurred_at)), before = before + (day > date(NEW.occurred_at))
    WHERE key_id = (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = NEW.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = NEW.rejected_issue_id) AND k.mode = 'contention' AND k.path = NEW.path) AND day >= date(NEW.occurred_at);
     END""",
        """CREATE TRIGGER heatmap_rollup_contention_delete AFTER DELETE ON claim_conflicts FOR EACH ROW BEGIN 
    UPDATE heatmap_rollup_keys SET total = total - 1 WHERE id = (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = OLD.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = OLD.rejected_issue_id) AND k.mode = 'contention' AND k.path = OLD.path);
    UPDATE heatmap_rollup_days SET n = n - (day = date(OLD.occurred_at)), before = before - (day > date(OLD.occurred_at))
    WHERE key_id = (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = OLD.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = OLD.rejected_issue_id) AND k.mode = 'contention' AND k.path = OLD.path) AND day >= date(OLD.occurred_at);
     END""",
        """CREATE TRIGGER heatmap_rollup_contention_update AFTER UPDATE OF path, occurred_at, rejected_issue_id ON claim_conflicts FOR EACH ROW WHEN OLD.path IS NOT NEW.path OR OLD.occurred_at IS NOT NEW.occurred_at OR OLD.rejected_issue_id IS NOT NEW.rejected_issue_id BEGIN 
    UPDATE heatmap_rollup_keys SET total = total - 1 WHERE id = (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = OLD.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = OLD.rejected_issue_id) AND k.mode = 'contention' AND k.path = OLD.path);
    UPDATE heatmap_rollup_days SET n = n - (day = date(OLD.occurred_at)), before = before - (day > date(OLD.occurred_at))
    WHERE key_id = (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = OLD.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = OLD.rejected_issue_id) AND k.mode = 'contention' AND k.path = OLD.path) AND day >= date(OLD.occurred_at);
     
    INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total)
    SELECT NEW.workspace_id, i.project_id, 'contention', NEW.path, date(NEW.occurred_at), date(NEW.occurred_at), 1
    FROM coordination_issue i WHERE i.id = NEW.rejected_issue_id
    ON CONFLICT (workspace_id, project_id, mode, path) DO UPDATE
    SET first_day = min(first_day, excluded.first_day),
        last_day = max(last_day, excluded.last_day), total = total + 1;

    INSERT INTO heatmap_rollup_days (key_id, day, n, before)
    WITH RECURSIVE x(id) AS (SELECT (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = NEW.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = NEW.rejected_issue_id) AND k.mode = 'contention' AND k.path = NEW.path)),
    edge(id, start, stop, upto) AS (
        SELECT x.id,
               coalesce(date((SELECT max(day) FROM heatmap_rollup_days WHERE key_id = x.id AND day < date(NEW.occurred_at)), '+1 day'), date(NEW.occurred_at)),
               CASE WHEN EXISTS (SELECT 1 FROM heatmap_rollup_days WHERE key_id = x.id AND day < date(NEW.occurred_at)) THEN date(NEW.occurred_at)
                    ELSE coalesce(date((SELECT min(day) FROM heatmap_rollup_days WHERE key_id = x.id AND day > date(NEW.occurred_at)), '-1 day'), date(NEW.occurred_at)) END,
               coalesce((SELECT before + n FROM heatmap_rollup_days WHERE key_id = x.id AND day < date(NEW.occurred_at) ORDER BY day DESC LIMIT 1), 0)
        FROM x),
    gap(day) AS (
        SELECT start FROM edge UNION ALL
        SELECT date(gap.day, '+1 day') FROM gap, edge WHERE gap.day < edge.stop)
    SELECT edge.id, gap.day, 0, edge.upto FROM edge, gap WHERE true
    ON CONFLICT (key_id, day) DO NOTHING;

    UPDATE heatmap_rollup_days SET n = n + (day = date(NEW.occurred_at)), before = before + (day > date(NEW.occurred_at))
    WHERE key_id = (SELECT k.id FROM heatmap_rollup_keys k WHERE k.workspace_id = NEW.workspace_id AND k.project_id = (SELECT project_id FROM coordination_issue WHERE id = NEW.rejected_issue_id) AND k.mode = 'contention' AND k.path = NEW.path) AND day >= date(NEW.occurred_at);
     END""",
    ],
}

# Every key and day counted afresh from the rows, every day of a key between its
# first and its last with a row.
RECOUNT = {
    "postgresql": [
        "DELETE FROM heatmap_rollup_days",
        "DELETE FROM heatmap_rollup_keys",
        "CREATE TEMPORARY TABLE heatmap_recount AS SELECT r.workspace_id, i.project_id, r.path, (r.claimed_at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM issue_file_claims r JOIN coordination_issue i ON i.id = r.issue_id  GROUP BY r.workspace_id, i.project_id, r.path, (r.claimed_at AT TIME ZONE 'UTC')::date",
        "ANALYZE heatmap_recount",
        "INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total) SELECT workspace_id, project_id, 'claims', path, min(day), max(day), sum(n) FROM heatmap_recount GROUP BY workspace_id, project_id, path",
        "ANALYZE heatmap_rollup_keys",
        "INSERT INTO heatmap_rollup_days (key_id, day, n, before) SELECT g.key_id, g.day, coalesce(x.n, 0), coalesce(sum(x.n) OVER ( PARTITION BY g.key_id ORDER BY g.day ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) FROM (SELECT id AS key_id, first_day + i AS day FROM heatmap_rollup_keys, generate_series(0, last_day - first_day) i WHERE mode = 'claims' ) g JOIN heatmap_rollup_keys k ON k.id = g.key_id LEFT JOIN heatmap_recount x ON x.workspace_id = k.workspace_id AND x.project_id = k.project_id AND x.path = k.path AND x.day = g.day",
        "DROP TABLE heatmap_recount",
        "CREATE TEMPORARY TABLE heatmap_recount AS SELECT r.workspace_id, i.project_id, r.path, (r.occurred_at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM claim_conflicts r JOIN coordination_issue i ON i.id = r.rejected_issue_id  GROUP BY r.workspace_id, i.project_id, r.path, (r.occurred_at AT TIME ZONE 'UTC')::date",
        "ANALYZE heatmap_recount",
        "INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total) SELECT workspace_id, project_id, 'contention', path, min(day), max(day), sum(n) FROM heatmap_recount GROUP BY workspace_id, project_id, path",
        "ANALYZE heatmap_rollup_keys",
        "INSERT INTO heatmap_rollup_days (key_id, day, n, before) SELECT g.key_id, g.day, coalesce(x.n, 0), coalesce(sum(x.n) OVER ( PARTITION BY g.key_id ORDER BY g.day ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) FROM (SELECT id AS key_id, first_day + i AS day FROM heatmap_rollup_keys, generate_series(0, last_day - first_day) i WHERE mode = 'contention' ) g JOIN heatmap_rollup_keys k ON k.id = g.key_id LEFT JOIN heatmap_recount x ON x.workspace_id = k.workspace_id AND x.project_id = k.project_id AND x.path = k.path AND x.day = g.day",
        "DROP TABLE heatmap_recount",
    ],
    "sqlite": [
        "DELETE FROM heatmap_rollup_days",
        "DELETE FROM heatmap_rollup_keys",
        "CREATE TEMPORARY TABLE heatmap_recount AS SELECT r.workspace_id, i.project_id, r.path, date(r.claimed_at) AS day, count(*) AS n FROM issue_file_claims r JOIN coordination_issue i ON i.id = r.issue_id  GROUP BY r.workspace_id, i.project_id, r.path, date(r.claimed_at)",
        "ANALYZE heatmap_recount",
        "INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total) SELECT workspace_id, project_id, 'claims', path, min(day), max(day), sum(n) FROM heatmap_recount GROUP BY workspace_id, project_id, path",
        "ANALYZE heatmap_rollup_keys",
        "INSERT INTO heatmap_rollup_days (key_id, day, n, before) SELECT g.key_id, g.day, coalesce(x.n, 0), coalesce(sum(x.n) OVER ( PARTITION BY g.key_id ORDER BY g.day ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) FROM (WITH RECURSIVE g(key_id, day, last_day) AS ( SELECT id, first_day, last_day FROM heatmap_rollup_keys WHERE mode = 'claims'  UNION ALL SELECT key_id, date(day, '+1 day'), last_day FROM g WHERE day < last_day) SELECT key_id, day FROM g) g JOIN heatmap_rollup_keys k ON k.id = g.key_id LEFT JOIN heatmap_recount x ON x.workspace_id = k.workspace_id AND x.project_id = k.project_id AND x.path = k.path AND x.day = g.day",
        "DROP TABLE heatmap_recount",
        "CREATE TEMPORARY TABLE heatmap_recount AS SELECT r.workspace_id, i.project_id, r.path, date(r.occurred_at) AS day, count(*) AS n FROM claim_conflicts r JOIN coordination_issue i ON i.id = r.rejected_issue_id  GROUP BY r.workspace_id, i.project_id, r.path, date(r.occurred_at)",
        "ANALYZE heatmap_recount",
        "INSERT INTO heatmap_rollup_keys (workspace_id, project_id, mode, path, first_day, last_day, total) SELECT workspace_id, project_id, 'contention', path, min(day), max(day), sum(n) FROM heatmap_recount GROUP BY workspace_id, project_id, path",
        "ANALYZE heatmap_rollup_keys",
        "INSERT INTO heatmap_rollup_days (key_id, day, n, before) SELECT g.key_id, g.day, coalesce(x.n, 0), coalesce(sum(x.n) OVER ( PARTITION BY g.key_id ORDER BY g.day ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) FROM (WITH RECURSIVE g(key_id, day, last_day) AS ( SELECT id, first_day, last_day FROM heatmap_rollup_keys WHERE mode = 'contention'  UNION ALL SELECT key_id, date(day, '+1 day'), last_day FROM g WHERE day < last_day) SELECT key_id, day FROM g) g JOIN heatmap_rollup_keys k ON k.id = g.key_id LEFT JOIN heatmap_recount x ON x.workspace_id = k.workspace_id AND x.project_id = k.project_id AND x.path = k.path AND x.day = g.day",
        "DROP TABLE heatmap_recount",
    ],
}



def run(schema_editor, statements):
    for statement in statements:
        schema_editor.execute(statement, params=None)


def previous():
    return import_module("heatmap.migrations.0002_rollup_totals")


def fill_every_day(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    run(schema_editor, previous().DROPPING[vendor] + TRIGGERS[vendor] + RECOUNT[vendor])


def reinstall_previous(apps, schema_editor):
    """Back at 0002 the filled days read the same, and its own triggers keep them."""
    vendor = schema_editor.connection.vendor
    run(schema_editor, previous().DROPPING[vendor] + previous().TRIGGERS[vendor])


class Migration(migrations.Migration):
    dependencies = [
        ("heatmap", "0002_rollup_totals"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="rollupday",
            index=models.Index(fields=["day", "key", "before"], name="rollup_days_by_day"),
        ),
        migrations.RunPython(fill_every_day, reinstall_previous),
    ]
