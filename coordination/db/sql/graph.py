"""The work graph in SQL (invariant 16 (the work graph)): an issue's links and expected paths as
JSON columns, whether it is blocked, and its collisions with live claims.

Each is a correlated subquery on the issue row ``alias``, so the ready queue's page
and the issue lists carry the whole graph of each issue in the statement that reads
it: no statement per issue, none per page.
"""

from coordination.db.sql.base import AGENT, CLAIM, ISSUE, SESSION, Dialect

LINK = "issue_links"
EXPECTED = "issue_expected_paths"

# A blocker is resolved when it is done or cancelled (Issue.CLOSED_STATUSES).
RESOLVED = "('done', 'cancelled')"

# The claims' partial unique index on (workspace_id, path) WHERE released_at IS NULL
# (sql.file_claims.UNRELEASED_PATHS), named for SQLite's planner.
UNRELEASED_PATHS = "one_unreleased_claim_per_path"


def json_rows(d: Dialect, values: list[str], source: str) -> str:
    """A scalar subquery: one JSON array of arrays, one per row of ``source`` (a FROM
    item, aliased ``k``), each row's ``values`` in order; ``[]`` for none. The
    reader sorts them: SQLite before 3.44 orders no aggregate."""
    if d.postgres:
        return (
            f"(SELECT COALESCE(json_agg(json_build_array({', '.join(values)})), '[]'::json)"
            f" FROM {source})"
        )
    return f"(SELECT json_group_array(json_array({', '.join(values)})) FROM {source})"


def links_json(d: Dialect, alias: str) -> str:
    """The links of issue ``alias``, both directions: ``[id, type, source, target,
    created_at, the other issue's status, its title]`` each. Two index scans: by
    source (``issue_link_unique``) and by target (``issue_link_incoming``)."""
    both = (
        f"(SELECT l.id, l.type, l.source_id, l.target_id, l.created_at, l.target_id AS other"
        f" FROM {LINK} l WHERE l.source_id = {alias}.id"
        f" UNION ALL SELECT l.id, l.type, l.source_id, l.target_id, l.created_at,"
        f" l.source_id AS other FROM {LINK} l WHERE l.target_id = {alias}.id)"
        f" k JOIN {ISSUE} o ON o.id = k.other"
    )
    values = ["k.id", "k.type", "k.source_id", "k.target_id", "k.created_at", "o.status", "o.title"]
    return json_rows(d, values, both)


def paths_json(d: Dialect, alias: str) -> str:
    """The expected paths of issue ``alias`` (each path's own probe row)."""
    rows = f"{EXPECTED} k WHERE k.issue_id = {alias}.id AND k.probe = k.path"
    return json_rows(d, ["k.path"], rows)


def blocked(alias: str, *, fence: str = "") -> str:
    """Issue ``alias`` has an unresolved blocker: one scan of ``issue_link_incoming``.
    ``fence`` (PostgreSQL's `` OFFSET 0``) keeps it that scan for each issue, where
    PostgreSQL may otherwise hash every unresolved blocker of the database first: right
    for a count, which looks at every ready issue, wasted on a page, which stops early."""
    return (
        f"EXISTS (SELECT 1 FROM {LINK} b JOIN {ISSUE} bi ON bi.id = b.source_id"
        f" WHERE b.target_id = {alias}.id AND b.type = 'blocks'"
        f" AND bi.status NOT IN {RESOLVED}{fence})"
    )


def held_at(d: Dialect, match: str) -> str:
    """The join of the claims ``c`` that ``match`` finds from the expected path ``e``
    and that are held now (holder live, or no session: invariant 5 (all-or-nothing)), always probed
    from ``e`` by the claims' partial index: the cost is flat in the number of live claims.
    SQLite: a CROSS JOIN keeps ``e`` the outer loop, and the index is named.
    PostgreSQL: a LATERAL subquery, kept from being merged back by OFFSET 0; left free,
    its planner at times read every live claim once per issue and probed the expected
    paths from each (17 s for a count over 10,000 issues, against 20 ms)."""
    live = f"EXISTS (SELECT 1 FROM {SESSION} s WHERE s.id = c.session_id AND {d.live('s')})"
    held = (
        f"c.workspace_id = e.workspace_id AND c.released_at IS NULL AND {match}"
        f" AND (c.session_id IS NULL OR {live})"
    )
    if d.postgres:
        return (
            f" JOIN LATERAL (SELECT c.path, c.issue_id, c.agent_id FROM {CLAIM} c"
            f" WHERE {held} OFFSET 0) c ON TRUE"
        )
    return f" CROSS JOIN {CLAIM} c INDEXED BY {UNRELEASED_PATHS} ON {held}"


def collision_rows(d: Dialect, alias: str) -> str:
    """A FROM item ``k(path, held_path, issue, agent)``: the expected paths of issue
    ``alias`` that another issue's held claim holds now, by the overlap rule
    (invariant 11 (overlap)). From each expected path, by index only (``held_at``): a claim at
    one of its probes (the path, a directory above it) by equality, and, for an
    expected directory, the claims under it by one range scan of the claims' partial
    index. The cost follows the issue's paths and what they find, never the number of
    claims held."""
    shown = "e.path AS path, c.path AS held_path, c.issue_id AS issue, a.name AS agent"
    other = f" LEFT JOIN {AGENT} a ON a.id = c.agent_id WHERE e.issue_id = {alias}.id"
    other += f" AND c.issue_id <> {alias}.id"
    at_probe = held_at(d, "c.path = e.probe")
    under = held_at(d, "c.path > e.probe AND c.path < e.subtree_end")
    return (
        f"(SELECT {shown} FROM {EXPECTED} e{at_probe}{other}"
        f" UNION ALL SELECT {shown} FROM {EXPECTED} e{under}{other} AND e.subtree_end <> '') k"
    )


def collisions_json(d: Dialect, alias: str) -> str:
    """Issue ``alias``'s collisions, ``[path, held_path, issue, agent]`` each."""
    return json_rows(d, ["k.path", "k.held_path", "k.issue", "k.agent"], collision_rows(d, alias))


def collides(d: Dialect, alias: str) -> str:
    """Issue ``alias`` has at least one collision."""
    return f"EXISTS (SELECT 1 FROM {collision_rows(d, alias)})"
