"""Statements per request, pinned by ``test_query_counts``: the same with 2 rows of
every kind as with 10, so a query per row cannot creep in.

Counted as Django's cursors send them, inside the test's transaction: there an
atomic block is a SAVEPOINT and its RELEASE (outside a test, a BEGIN and a COMMIT).
The API key's lookup is the first statement of each request. The rate limits are
off (on PostgreSQL's database cache their counter is one upsert more per request;
SQLite's counters are in a file of their own, outside Django's cursors). One
number where SQLite and PostgreSQL agree, else one per vendor: PostgreSQL takes
advisory and row locks that SQLite's single writer does without, and returns the
heartbeat's session from its UPDATE, which SQLite reads after.

A change writes its events (invariant 12 (one event per change)) in one more statement, the last of
its transaction (on PostgreSQL it takes the event-writer lock too); a change that was one
statement (a release) now has a transaction around it (its SAVEPOINT and RELEASE here);
on PostgreSQL a release of files writes its events in its own statement, and needs none.
A post names its scope's project (one lookup), so a forced claim's three posts cost
three statements more each.
"""

COUNTS: dict[str, int | dict[str, int]] = {
    # Lists: the key, the page's count, the page (and the issues' unreleased leases).
    "GET /sessions/": 3,
    "GET /sessions/?live=true": 3,
    "GET /projects/": 3,
    "GET /issues/": 4,
    "GET /issues/?leased=true": 4,
    # The ready queue's page brings each issue's unreleased lease in its own rows.
    "GET /issues/ready/": 3,
    "GET /issues/ready/?include_not_ready=true": 3,
    "GET /leases/": 3,
    "GET /wip-cap-denials/": 3,
    "GET /worktrees/": 3,
    "GET /runs/": 3,
    "GET /file-claims/": 3,
    "GET /file-claims/?covering=": 3,  # the path and its ancestors: one equality lookup
    "GET /claim-conflicts/": 3,
    "GET /messages/": 3,
    "GET /messages/?agent=": 4,  # + the issues the agent holds
    # Details: the key and the row.
    "GET /sessions/{id}/": 2,
    "GET /projects/{id}/": 2,
    "GET /issues/{id}/": 3,
    "GET /leases/{id}/": 2,
    "GET /runs/{id}/": 2,
    "GET /file-claims/{id}/": 2,
    "GET /workflow/": 1,
    # Sessions.
    "POST /sessions/": 12,
    "POST /sessions/{id}/heartbeat/": {"sqlite": 3, "postgresql": 2},
    # The released leases name their projects from the UPDATE (no lookup after it);
    # + the session's resource holds, and their release (one UPDATE however many).
    "POST /sessions/{id}/end/": 15,
    # Leases.
    # SQL, as the file claims: the project's lock (found from the issue), the issue's
    # share with the session, the insert that returns the lease, its event. + 1, the
    # assignee, for an issue that has none (this one has). Held: after the refused
    # insert, the session's liveness and the lease it holds.
    "POST /issues/{id}/claim/": 7,
    "POST /issues/{id}/claim/ (held)": 8,
    # One compare-and-set that returns the lease, with its agent, and its event.
    "POST /issues/{id}/release/": 5,
    "POST /issues/{id}/release/ (fence)": 5,
    # File claims: however many paths, and however many claims are held (directory
    # claims included: the overlapping holders are one statement, index scans only,
    # and every dead holder is reclaimed by one more). The issue and the claiming
    # session are one read, inside the claim's transaction.
    "POST /file-claims/": {"sqlite": 8, "postgresql": 9},
    "POST /file-claims/ (directories)": {"sqlite": 8, "postgresql": 9},
    "POST /file-claims/ (directory conflict)": {"sqlite": 8, "postgresql": 9},
    "POST /file-claims/ (directory force)": {"sqlite": 24, "postgresql": 25},
    "POST /file-claims/ (fence)": {"sqlite": 9, "postgresql": 13},
    "POST /file-claims/ (conflict)": {"sqlite": 8, "postgresql": 9},
    "POST /file-claims/ (force)": {"sqlite": 24, "postgresql": 25},
    # PostgreSQL: the release and its events in one statement, with no transaction.
    "POST /file-claims/release/": {"sqlite": 5, "postgresql": 2},
    "POST /file-claims/release/ (all)": {"sqlite": 5, "postgresql": 2},
    # Resources: the key, the resource, the session; in the transaction the resource's
    # lock, the session's liveness, its unreleased holds, the line, the fence, the insert
    # and its event. A refusal counts the line instead of drawing a fence, and writes its
    # event in a transaction of its own. A release: the hold under its lock, the UPDATE,
    # the event, and the hold read again (its stamp).
    "POST /resources/{name}/acquire/": 12,
    "POST /resources/{name}/acquire/ (busy)": 13,
    "POST /resources/{name}/release/": 9,
    "GET /resources/": 4,  # + the live holders, prefetched
    "GET /resource-holds/": 3,
    "POST /file-claims/check/": 3,
    "POST /file-claims/check/ (directories)": 3,
    # A unit of work.
    # + the blocker check, before anything, and again at the move to in_progress (on
    # PostgreSQL after the graph lock).
    # - the assignee UPDATE when the issue has an assignee, read under the lease
    # claim's share (the world's issue has one): only a takeover replaces it.
    # - the lease claim's SAVEPOINT and RELEASE: a step of start_work's transaction, not a
    # block of its own (it returns a WIP refusal, which start_work logs after its rollback).
    "POST /work/start/": {"sqlite": 36, "postgresql": 38},  # the lease claim's, above
    # + the links and expected paths, for the issue it shows.
    "POST /work/finish/": 39,  # the release's project; the end's resource holds
    # Messages, runs.
    "POST /messages/": 9,
    "POST /runs/": {"sqlite": 16, "postgresql": 17},  # the lease claim's, above
    "POST /runs/{id}/finish/": 8,
    # Projects, issues, worktrees.
    "POST /issues/": 10,
    "PATCH /issues/{id}/": 6,
    "POST /issues/{id}/transition/": 8,
    "POST /projects/": 5,
    "PATCH /projects/{id}/": 5,
    "POST /worktrees/": 4,
    # With an agent key (invariant 13 (the key is the actor)): the key's agent comes with the key,
    # in its one statement. The heartbeat matches the session's agent in its UPDATE: no statement
    # more. A call naming a session in its body reads that session's agent first (one
    # indexed read, before the service); a post without one is signed by the key's agent.
    # (The register and start_work of a known agent, binding no worktree: fewer than
    # the fleet rows above, which create the agent and bind it.)
    "POST /sessions/ (agent key)": 7,
    "POST /sessions/{id}/heartbeat/ (agent key)": {"sqlite": 3, "postgresql": 2},
    "POST /issues/{id}/claim/ (agent key)": 8,
    "POST /file-claims/ (agent key)": {"sqlite": 9, "postgresql": 10},
    "POST /file-claims/ (agent key, force)": {"sqlite": 25, "postgresql": 26},
    "POST /file-claims/release/ (agent key)": {"sqlite": 6, "postgresql": 3},
    "POST /messages/ (agent key)": 8,  # no session to read
    "POST /work/start/ (agent key)": {"sqlite": 31, "postgresql": 33},  # as /work/start/
    # Keys: the key; then the list's count and page (with agents); or the mint (the
    # agent's get-or-create, the key, in one transaction); or the revoke (its row, the
    # compare-and-set, the re-read).
    "GET /keys/me/": 1,
    "GET /keys/": 3,
    "POST /keys/": 8,
    "POST /keys/{id}/revoke/": 4,
}


def expected(endpoint: str, vendor: str) -> int:
    counts = COUNTS[endpoint]
    return counts if isinstance(counts, int) else counts[vendor]
