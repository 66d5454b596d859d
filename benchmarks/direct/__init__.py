"""The database's ceiling: each bench operation as the SQL the API runs for it, sent
straight through psycopg (PostgreSQL) or sqlite3 (SQLite), with no HTTP and no Django
in the process.

Same statements, same transactions, same locks, in the same order as the services and
selectors run them (each method below names the function it mirrors; the ORM's
statements were captured and written out), on one persistent connection per client
process, in autocommit between transactions as Django runs. Per operation:

- every request: the API key (``keys.active_key``): its lookup by hash the first time,
  then its row by primary key with its workspace's key ring version;
- heartbeat (``agents.heartbeat_session``): the UPDATE of ``agent_sessions`` with the
  database clock, returning the session as the API shows it (PostgreSQL), or followed
  by that read (SQLite);
- lease claim (``leases.claim_issue``): in one transaction the project's row lock,
  found from the issue (PostgreSQL ``FOR NO KEY UPDATE``; SQLite ``BEGIN
  IMMEDIATE``), the issue ``FOR SHARE`` with the session, the INSERT that judges the
  session's liveness, counts live leases against the WIP cap, numbers the fence and
  returns the lease, the assignee UPDATE if the issue has none, and the event;
- lease release (``leases.release_issue`` without a fence): in one transaction the
  compare-and-set UPDATE returning the lease, its project and agent, and the event;
- files claim (``file_claims.claim_files``/``_attempt``): the issue lookup; in one
  transaction the session with its liveness, (PostgreSQL) the advisory locks per path
  in key order and the ``FOR SHARE`` of the claiming and holding issues with the
  claiming issue's status (SQLite: that status), the unreleased holders ``FOR
  UPDATE``, then either the conflict log (refused: committed) or the INSERT ... ON
  CONFLICT DO NOTHING RETURNING;
- files release (``file_claims.release_files``): one UPDATE of the session's
  unreleased claims of the issue, locked in path order, RETURNING their paths;
- live and ready lists: the paginator's count, then the first page of 100
  (``sql.session_count`` and ``sql.session_page``, ``sql.queue_count`` and
  ``sql.queue_page``: each issue with its unreleased lease, in the page's rows).

Left out, on purpose:

- the rate-limit counter (one upsert per request while the throttle is on; the
  throttle on/off lines show its cost instead);
- the per-request health check of a persistent connection (``SELECT 1``,
  ``CONN_HEALTH_CHECKS``): here the connection is simply kept;
- path normalisation, JSON parsing and rendering, model instances, and the API-key
  hashing (the digest is computed once, by the command);
- branches the bench never takes: reclaiming a dead holder, the WIP-cap denial
  record, retries after a lost race, ``force``, fences.

Every statement an operation sends (the key lookup, the heartbeat, the lease's locks
and WIP-cap insert, the claim's locks, holders, inserts and conflict log, the
release, the lists) is built by the same ``coordination.db.sql`` builders the
services call, which import nothing from Django, so this process never does; only
each client's own session, opened before the runs and ended after them, is written
out here. The values the services decide with (the closed statuses, how many
conflicts an event shows, the API's page size) come in the ``DirectTarget``, read off
Django by the command, never copied. The command counts each request's statements on
both sides and fails the run when they differ, and a test
(tests/benchmarks/test_direct_follows_the_services.py) replays each operation's rows
to this driver and requires the services' very statements, in their order: this module
has to follow the services.
"""

from benchmarks.direct.connection import DirectTarget, Refused
from benchmarks.direct.driver import DirectDriver, main

__all__ = ["DirectDriver", "DirectTarget", "Refused", "main"]
