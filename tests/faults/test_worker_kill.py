"""A gunicorn worker killed with SIGKILL during a ``claim_files`` load: every request
is all or nothing, whatever moment the kill lands in.

The app runs under gunicorn in a subprocess (``gunicorn`` fixture), pointed at the
test database, and is driven over HTTP from threads. Every wait here is bounded: HTTP
and database calls carry timeouts, loops have deadlines, the server is stopped on
exit.
"""

import os
import random
import signal
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from benchmarks.server import Server
from coordination.db.sql import ADVISORY_LOCK_KEYS
from coordination.models import ClaimConflict, FileClaim, Issue
from coordination.services.locking import path_lock_key
from tests.faults.client import Load, Outcome, call, wait_until
from tests.faults.database import (
    admin_connection,
    assert_all_or_nothing,
    assert_no_claim_without_its_issue,
    assert_no_path_held_twice,
    backends,
    db_settings,
    pg_client_ports,
)

BOOT_TIMEOUT = 60  # gunicorn workers import Django; the machine may be busy

BATCH = 12  # requests in a row share a pool of paths, so concurrent ones overlap
POOL_SIZE = 20
SET_SIZE = 5
MAX_CLAIMS = 4000
INSERT_CLAIMS = "INSERT INTO issue_file_claims"


@dataclass(frozen=True)
class Kill:
    pid: int
    state: str  # the backend's state when the worker was frozen ("plain": not frozen)
    query: str  # the last statement it ran
    path_locks: frozenset[int] = frozenset()  # the path locks its transaction held


def path_lock_objid(workspace_id: int, path: str) -> int:
    """A path's advisory lock as ``pg_locks.objid`` shows it: its key as an unsigned oid."""
    return path_lock_key(workspace_id, path) & 0xFFFFFFFF


def freeze_and_kill(
    server: Server,
    admin: psycopg.Connection[Any],
    rng: random.Random,
    *,
    wanted: Callable[[str, str], bool],
    timeout: float,
) -> Kill | None:
    """Freeze a random worker (SIGSTOP), look at its database backend, and SIGKILL it
    if ``wanted(state, query)``; else let it go on (SIGCONT) and try again later.

    This is how the kill is placed inside a claim's transaction instead of between
    requests: a frozen worker cannot commit, so what pg_stat_activity shows is what
    the transaction has done when the worker dies.
    """
    pg_port = int(db_settings()["PORT"] or 5432)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = server.worker_pids()
        if not workers:
            time.sleep(0.05)
            continue
        pid = rng.choice(workers)
        ports = pg_client_ports(pid, pg_port)
        if not ports:
            time.sleep(0.01)
            continue
        os.kill(pid, signal.SIGSTOP)
        killed = False
        try:
            time.sleep(0.003)  # let a statement already sent finish
            row = admin.execute(
                "SELECT state, query, pid FROM pg_stat_activity "
                "WHERE datname = %s AND client_port = ANY(%s)",
                [db_settings()["NAME"], sorted(ports)],
            ).fetchone()
            if row is not None and wanted(row[0] or "", row[1] or ""):
                locks = admin.execute(
                    "SELECT objid::bigint FROM pg_locks WHERE pid = %s AND granted"
                    " AND locktype = 'advisory' AND classid = %s",
                    [row[2], ADVISORY_LOCK_KEYS["file_claim_path"]],
                ).fetchall()
                os.kill(pid, signal.SIGKILL)
                killed = True
                return Kill(pid, row[0], row[1], frozenset(objid for (objid,) in locks))
        finally:
            if not killed:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        time.sleep(rng.uniform(0, 0.02))
    return None


def booted_workers(server: Server) -> list[int]:
    """Workers that have served a request (they hold a database connection); a worker
    still booting after a kill would drop no request."""
    pg_port = int(db_settings()["PORT"] or 5432)
    found: list[int] = []

    def look() -> bool:
        found[:] = [pid for pid in server.worker_pids() if pg_client_ports(pid, pg_port)]
        return bool(found)

    wait_until(look, BOOT_TIMEOUT, "a worker with a database connection")
    return found


def after_claim_insert(state: str, query: str) -> bool:
    return state == "idle in transaction" and INSERT_CLAIMS in query


def in_transaction(state: str, query: str) -> bool:
    return state == "idle in transaction"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_claim_leaves_every_request_all_or_nothing(
    workspace, project, make_session, raw_key, gunicorn
):
    rng = random.Random(20240607)
    sessions = [make_session(f"loader-{n}") for n in range(BATCH)]
    issues = Issue.objects.bulk_create(
        Issue(workspace=workspace, project=project, title=f"claim {n}") for n in range(MAX_CLAIMS)
    )
    wanted = [
        rng.sample([f"b{n // BATCH:04d}/src/m{k:02d}.py" for k in range(POOL_SIZE)], SET_SIZE)
        for n in range(MAX_CLAIMS)
    ]
    # No two requests want the same paths, so the paths a transaction has locked name
    # its request (the statements in pg_stat_activity do not: their values are bound
    # apart from the text).
    assert len({frozenset(paths) for paths in wanted}) == MAX_CLAIMS

    def claim(n: int) -> Outcome:
        body = {"issue": issues[n].pk, "paths": wanted[n], "session": sessions[n % BATCH].pk}
        return call(gunicorn.port, "POST", "/file-claims/", raw_key, body)

    load = Load(claim, threads=12, limit=MAX_CLAIMS).start()
    kills: list[Kill] = []
    admin = admin_connection()
    try:
        load.wait_for(40, timeout=60)
        # First kill: a worker whose transaction has inserted claims but not committed;
        # failing that within the time given, any worker inside a transaction.
        for wanted_state, seconds in ((after_claim_insert, 20), (in_transaction, 15)):
            kill = freeze_and_kill(gunicorn, admin, rng, wanted=wanted_state, timeout=seconds)
            if kill is not None:
                kills.append(kill)
                break
        assert kills, "no worker was caught inside a transaction"
        # Then two plain kills at whatever moment the load is in.
        for _ in range(2):
            load.wait_for(load.done() + 40, timeout=60)
            pid = rng.choice(booted_workers(gunicorn))
            os.kill(pid, signal.SIGKILL)
            kills.append(Kill(pid=pid, state="plain", query=""))
        load.wait_for(load.done() + 40, timeout=60)
        assert load.stop(), "client threads did not finish"
        assert gunicorn.alive(), gunicorn.log_tail()
        wait_until(lambda: backends(admin, in_transaction=True) == 0, 15, "open transactions")
    finally:
        load.stop()
        admin.close()

    outcomes: dict[int, Outcome] = load.results
    assert all(isinstance(o, Outcome) for o in outcomes.values()), outcomes
    accepted = {n for n, o in outcomes.items() if o.status == 201}
    refused = {n for n, o in outcomes.items() if o.status == 409}
    died = {n for n, o in outcomes.items() if o.error is not None}
    others = {
        n: (o.status, o.body) for n, o in outcomes.items() if o.status not in (201, 409, None)
    }
    assert others == {}, f"answers other than 201/409: {others}"
    assert all(outcomes[n].code == "file_conflict" for n in refused)
    assert died, "a killed worker drops the requests it was serving"

    assert_no_path_held_twice()
    assert_no_claim_without_its_issue()
    held_by_died = 0
    for n, outcome in outcomes.items():
        issue_id = issues[n].pk
        claimed = assert_all_or_nothing(issue_id, wanted[n])
        logged = list(
            ClaimConflict.objects.filter(rejected_issue_id=issue_id).values_list(
                "path", "holding_issue_id", "forced"
            )
        )
        if n in accepted:
            assert claimed == set(wanted[n])
            assert sorted(c["path"] for c in outcome.body["claims"]) == sorted(wanted[n])
            assert logged == []
        elif n in refused:
            assert claimed == set()
            conflicts = outcome.body["conflicts"]
            assert conflicts and {c["path"] for c in conflicts} <= set(wanted[n])
            assert sorted(logged) == sorted((c["path"], c["issue"], False) for c in conflicts)
        else:  # the connection died: either outcome, but whole, and never both
            held_by_died += bool(claimed)
            assert not (claimed and logged), f"issue {issue_id} both claimed and refused"
            assert len({path for path, _, _ in logged}) == len(logged)
            assert {path for path, _, _ in logged} <= set(wanted[n])
    unreleased = FileClaim.objects.filter(released_at__isnull=True)
    assert unreleased.count() == SET_SIZE * len(accepted) + SET_SIZE * held_by_died
    assert ClaimConflict.objects.filter(
        rejected_issue_id__in=[issues[n].pk for n in refused]
    ).count() == sum(len(outcomes[n].body["conflicts"]) for n in refused)

    first = kills[0]
    if INSERT_CLAIMS in first.query:
        # Killed after its INSERT and before COMMIT: the claims it inserted are gone.
        killed = [
            n
            for n in outcomes
            if {path_lock_objid(workspace.pk, path) for path in wanted[n]} <= first.path_locks
        ]
        assert len(killed) == 1, (first.path_locks, killed)
        assert outcomes[killed[0]].error is not None
        assert not FileClaim.objects.filter(issue_id=issues[killed[0]].pk).exists()
    print(
        f"\nworker kills: {[(k.state, k.query.strip()[:40]) for k in kills]}; requests "
        f"{len(outcomes)}: 201={len(accepted)} 409={len(refused)} dropped={len(died)} "
        f"(of which fully claimed: {held_by_died}); "
        f"claim_conflicts={ClaimConflict.objects.count()}"
    )
