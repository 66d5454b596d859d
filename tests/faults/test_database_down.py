"""PostgreSQL unreachable during a load run: the API answers 503 ``unavailable``
while it is down and recovers by itself, without a worker restart.

The app runs under gunicorn in a subprocess (``gunicorn`` fixture), pointed at the
test database, and is driven over HTTP from threads. Every wait here is bounded.
"""

import random
import threading
import time
from typing import Any

import psycopg
import pytest
from django.db import connections

from coordination.models import Issue, Project
from tests.faults.client import Load, Outcome, assert_json_answer, call, wait_until
from tests.faults.database import (
    admin_connection,
    assert_all_or_nothing,
    assert_leases_within_limits,
    assert_no_claim_without_its_issue,
    assert_no_path_held_twice,
    backends,
    db_settings,
)

LEASE_ISSUES = 12
FILE_POOL = [f"src/shared/f{k:02d}.py" for k in range(20)]
DOWN_SECONDS = 3


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_api_answers_503_while_the_database_is_down_and_recovers_by_itself(
    workspace, project, make_session, raw_key, gunicorn
):
    """How "database down" is injected: the test database is made to refuse
    connections (``ALTER DATABASE ... ALLOW_CONNECTIONS false``) and its backends are
    terminated (``pg_terminate_backend``), from an admin connection to the
    ``postgres`` database. For the app that is what a stopped server looks like (live connections
    cut, new ones refused), but stopping the server itself would also break every
    other database on this shared machine. Connections are allowed again in
    ``finally``, whatever happens.
    """
    other = Project.objects.create(workspace=workspace, key="ops", name="Ops", agent_wip_limit=2)
    lease_issues = Issue.objects.bulk_create(
        Issue(workspace=workspace, project=project if n % 2 else other, title=f"lease {n}")
        for n in range(LEASE_ISSUES)
    )
    file_issues = Issue.objects.bulk_create(
        Issue(workspace=workspace, project=project, title=f"files {n}") for n in range(3000)
    )
    sessions = [make_session(f"agent-{n}") for n in range(8)]
    file_requests: dict[int, list[str]] = {}
    outcomes: list[tuple[str, Outcome]] = []
    record_lock = threading.Lock()

    def record(kind: str, outcome: Outcome) -> Outcome:
        with record_lock:
            outcomes.append((kind, outcome))
        return outcome

    def job(n: int) -> None:
        rng = random.Random(n)
        session = rng.choice(sessions).pk
        kind = rng.choice(("files", "lease", "heartbeat"))
        port = gunicorn.port
        if kind == "files":
            issue, paths = file_issues[n].pk, rng.sample(FILE_POOL, 3)
            file_requests[issue] = paths
            body = {"issue": issue, "paths": paths, "session": session}
            claimed = record(kind, call(port, "POST", "/file-claims/", raw_key, body))
            if claimed.status == 201 and rng.random() < 0.6:
                body = {"issue": issue}
                record("release", call(port, "POST", "/file-claims/release/", raw_key, body))
        elif kind == "lease":
            issue = rng.choice(lease_issues).pk
            body = {"session": session}
            leased = record(kind, call(port, "POST", f"/issues/{issue}/claim/", raw_key, body))
            if leased.status == 201 and rng.random() < 0.6:
                path = f"/issues/{issue}/release/"
                record("release", call(port, "POST", path, raw_key, body))
        else:
            record(kind, call(port, "POST", f"/sessions/{session}/heartbeat/", raw_key))

    workers_before = gunicorn.worker_pids()
    admin = admin_connection()
    load = Load(job, threads=6, limit=len(file_issues))
    try:
        load.start().wait_for(30, timeout=60)
        # Database down.
        admin.execute(f'ALTER DATABASE "{db_settings()["NAME"]}" ALLOW_CONNECTIONS false')
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [db_settings()["NAME"]],
        )
        wait_until(lambda: backends(admin) == 0, 15, "the test database's backends to end")
        down = time.monotonic()
        time.sleep(DOWN_SECONDS)
        # Database back.
        admin.execute(f'ALTER DATABASE "{db_settings()["NAME"]}" ALLOW_CONNECTIONS true')
        up = time.monotonic()
        wait_until(
            lambda: (
                sum(1 for _, o in list(outcomes) if o.started >= up and o.status in (200, 201))
                >= 30
            ),
            60,
            "30 successes after the database came back",
        )
        assert load.stop(), "client threads did not finish"
        # A database restart between requests: every persistent connection is cut
        # while idle. Health checks replace them before use: not even one 503.
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [db_settings()["NAME"]],
        )
        wait_until(lambda: backends(admin) == 0, 15, "the idle backends to end")
        after_restart = [
            call(gunicorn.port, "GET", f"/sessions/{sessions[0].pk}/", raw_key)
            for _ in range(4 * gunicorn.workers)
        ]
    finally:
        load.stop()
        try:
            admin.execute(f'ALTER DATABASE "{db_settings()["NAME"]}" ALLOW_CONNECTIONS true')
        except psycopg.Error:
            with admin_connection() as again:
                again.execute(f'ALTER DATABASE "{db_settings()["NAME"]}" ALLOW_CONNECTIONS true')
        admin.close()
        connections.close_all()  # this process's connection was terminated too

    assert gunicorn.worker_pids() == workers_before, "no worker was restarted"
    for _, outcome in outcomes:
        assert_json_answer(outcome)
    statuses = {o.status for _, o in outcomes}
    assert statuses <= {200, 201, 409, 503}, statuses
    conflicts = {o.code for _, o in outcomes if o.status == 409}
    assert conflicts <= {"file_conflict", "lease_held", "wip_limit_reached", "lease_not_held"}
    while_down = [o for _, o in outcomes if o.started >= down and o.ended <= up]
    assert len(while_down) >= 10, "the load went on while the database was down"
    assert {o.status for o in while_down} == {503}, [(o.status, o.body) for o in while_down]
    after = [o for _, o in outcomes if o.started >= up]
    assert [(o.status, o.body) for o in after if o.status == 503] == []
    assert sum(o.status in (200, 201) for o in after) >= 30
    assert [(o.status, o.body) for o in after_restart if o.status != 200] == []

    assert_no_path_held_twice()
    assert_no_claim_without_its_issue()
    assert_leases_within_limits()
    for issue_id, paths in file_requests.items():
        assert_all_or_nothing(issue_id, paths)
    counts: dict[Any, int] = {}
    for kind, outcome in outcomes:
        key = (kind, outcome.status, outcome.code)
        counts[key] = counts.get(key, 0) + 1
    print(
        f"\nrequests {len(outcomes)}; while down {len(while_down)} (all 503); after up "
        f"{len(after)}; after the idle restart {len(after_restart)} (all 200); "
        f"by kind: {sorted(counts.items(), key=str)}"
    )
