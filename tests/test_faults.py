"""Fault injection: killed app workers, the database going away, agents that go silent,
and the 503 ``unavailable`` answer while the database is down.

The PostgreSQL tests run the real app under gunicorn in a subprocess, pointed at the
test database, and drive it over HTTP from threads. Every wait here is bounded: HTTP
and database calls carry timeouts, loops have deadlines, the subprocess is stopped
in ``finally``.
"""

import http.client
import json
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
from django.core.handlers.exception import convert_exception_to_response
from django.db import (
    IntegrityError,
    InterfaceError,
    OperationalError,
    ProgrammingError,
    connection,
    connections,
)
from django.db.models import DateTimeField, ExpressionWrapper, Value
from django.test import RequestFactory
from rest_framework.test import APIClient

from coordination.api.auth import ApiKeyAuthentication
from coordination.liveness import DbNow
from coordination.models import (
    AgentSession,
    ApiKey,
    ClaimConflict,
    FileClaim,
    Issue,
    IssueLease,
    Project,
    ReleaseReason,
    Run,
    Worktree,
    WorktreeLock,
)
from coordination.services import file_claims
from projektor.middleware import DatabaseUnavailableMiddleware, is_database_unavailable
from tests.api_helpers import V1, assert_error, post

BASE_DIR = Path(settings.BASE_DIR)
GUNICORN = BASE_DIR / ".venv" / "bin" / "gunicorn"
HTTP_TIMEOUT = 20  # seconds, per request
BOOT_TIMEOUT = 60  # gunicorn workers import Django; the machine may be busy
PG_TIMEOUT = 10  # seconds: connect and statement timeout of the admin connection


# --- helpers: HTTP -------------------------------------------------------------------


@dataclass
class Outcome:
    """One HTTP exchange: the answer, or the error that ended the connection."""

    started: float
    ended: float
    status: int | None = None
    body: Any = None
    content_type: str = ""
    retry_after: str | None = None
    error: str | None = None

    @property
    def code(self) -> str | None:
        return self.body.get("code") if isinstance(self.body, dict) else None


def call(port: int, method: str, path: str, key: str, body: Any = None) -> Outcome:
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT)
    headers = {"Authorization": f"Bearer {key}", "Connection": "close"}
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, f"{V1}{path}", body=payload, headers=headers)
        response = conn.getresponse()
        raw = response.read()
    except (OSError, http.client.HTTPException) as error:  # reset, refused, timeout
        return Outcome(started, time.monotonic(), error=f"{type(error).__name__}: {error}")
    finally:
        conn.close()
    try:
        parsed: Any = json.loads(raw)
    except ValueError:
        parsed = raw[:300].decode("utf-8", "replace")
    return Outcome(
        started,
        time.monotonic(),
        status=response.status,
        body=parsed,
        content_type=response.getheader("Content-Type", ""),
        retry_after=response.getheader("Retry-After"),
    )


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class Load:
    """Client threads that each call ``job(index)`` for index 0, 1, 2, ... until
    stopped or ``limit`` is reached; results by index."""

    def __init__(self, job: Callable[[int], Any], *, threads: int, limit: int) -> None:
        self.job = job
        self.limit = limit
        self.results: dict[int, Any] = {}
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        self._next = 0
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _take(self) -> int | None:
        with self._lock:
            if self.stopped.is_set() or self._next >= self.limit:
                return None
            self._next += 1
            return self._next - 1

    def _run(self) -> None:
        while (index := self._take()) is not None:
            try:
                result = self.job(index)
            except Exception as error:  # noqa: BLE001 - reported by the assertions
                result = error
            with self._lock:
                self.results[index] = result

    def done(self) -> int:
        with self._lock:
            return len(self.results)

    def start(self) -> "Load":
        for thread in self._threads:
            thread.start()
        return self

    def wait_for(self, count: int, timeout: float) -> None:
        wait_until(lambda: self.done() >= count, timeout, f"{count} requests")

    def stop(self, timeout: float = HTTP_TIMEOUT + 10) -> bool:
        """Stop taking jobs and wait for the running ones; True if all threads ended."""
        self.stopped.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread.ident is not None:
                thread.join(max(0.1, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)


# --- helpers: processes and PostgreSQL -------------------------------------------------


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (gunicorn's workers, for its master)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            after_name = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while we looked
        state, parent = after_name[0], int(after_name[1])
        if parent == pid and state not in ("Z", "X"):
            found.append(int(stat.parent.name))
    return sorted(found)


def pg_client_ports(pid: int, server_port: int) -> set[int]:
    """Local ports of ``pid``'s TCP connections to PostgreSQL: they name its backends
    in ``pg_stat_activity.client_port``."""
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except OSError:
        return set()
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == server_port:
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def db_settings() -> dict[str, Any]:
    return connection.settings_dict


def admin_connection() -> psycopg.Connection[Any]:
    """A superuser connection to the ``postgres`` database, outside Django."""
    db = db_settings()
    conn = psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=int(db["PORT"] or 5432),
        user=db["USER"] or "postgres",
        password=db["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
        connect_timeout=PG_TIMEOUT,
    )
    conn.execute(f"SET statement_timeout = '{PG_TIMEOUT}s'")
    return conn


def url_of_the_test_database() -> str:
    db = db_settings()
    auth = quote(db["USER"] or "postgres")
    if db["PASSWORD"]:
        auth += ":" + quote(db["PASSWORD"])
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def backends(admin: psycopg.Connection[Any], *, in_transaction: bool = False) -> int:
    """How many connections the test database has (optionally: inside a transaction)."""
    extra = " AND xact_start IS NOT NULL" if in_transaction else ""
    row = admin.execute(
        f"SELECT count(*) FROM pg_stat_activity WHERE datname = %s{extra}",
        [db_settings()["NAME"]],
    ).fetchone()
    assert row is not None
    return int(row[0])


class Gunicorn:
    """``gunicorn projektor.wsgi`` on a loopback port, pointed at the test database."""

    def __init__(self, log: Path, workers: int = 3) -> None:
        self.log_path = log
        self.workers = workers
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, raw_key: str) -> "Gunicorn":
        # The port is bound here and the socket handed over (fd://): no race for it.
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        env = {
            **os.environ,
            "DATABASE_URL": url_of_the_test_database(),
            "SECRET_KEY": "fault-injection-only",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DEBUG": "false",
            "PROJEKTOR_SESSION_TTL_SECONDS": str(settings.PROJEKTOR_SESSION_TTL_SECONDS),
            "PROJEKTOR_THROTTLE_KEY": "1000000/min",
            "PROJEKTOR_THROTTLE_ANON": "1000000/min",
        }
        with listener, self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    str(GUNICORN),
                    "projektor.wsgi:application",
                    f"--workers={self.workers}",
                    f"--bind=fd://{listener.fileno()}",
                    "--timeout=30",
                    "--graceful-timeout=5",
                    "--log-level=warning",
                ],
                cwd=BASE_DIR,
                env=env,
                pass_fds=[listener.fileno()],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, for the last-resort kill
            )
        wait_until(
            lambda: self.alive() and len(self.worker_pids()) == self.workers,
            BOOT_TIMEOUT,
            "gunicorn's workers",
        )
        wait_until(
            lambda: call(self.port, "GET", "/sessions/", raw_key).status == 200,
            BOOT_TIMEOUT,
            "the app to answer",
        )
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def worker_pids(self) -> list[int]:
        return children(self.process.pid) if self.alive() else []  # type: ignore[union-attr]

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is None:
            return
        workers = self.worker_pids()
        for pid in workers:  # a worker left frozen would never finish its shutdown
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        for pid in workers:  # orphans of a master that died first
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def raw_key(workspace: Any) -> str:
    return ApiKey.issue(workspace, "fleet")[1]


@pytest.fixture
def gunicorn(tmp_path: Path, raw_key: str) -> Iterator[Gunicorn]:
    server = Gunicorn(tmp_path / "gunicorn.log")
    try:
        yield server.start(raw_key)
    finally:
        server.stop()


# --- invariants ------------------------------------------------------------------------


def assert_no_path_held_twice() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT workspace_id, path, count(*) FROM issue_file_claims "
            "WHERE released_at IS NULL GROUP BY workspace_id, path HAVING count(*) > 1"
        )
        assert cursor.fetchall() == []


def assert_no_claim_without_its_issue() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM issue_file_claims c "
            "LEFT JOIN coordination_issue i ON i.id = c.issue_id WHERE i.id IS NULL"
        )
        assert cursor.fetchone() == (0,)


def assert_leases_within_limits() -> None:
    """One unreleased lease per issue; live leases per project within its WIP cap."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT issue_id FROM issue_leases WHERE released_at IS NULL "
            "GROUP BY issue_id HAVING count(*) > 1"
        )
        assert cursor.fetchall() == []
    for project in Project.objects.all():
        live = IssueLease.objects.unreleased().with_live().filter(issue__project=project)
        assert sum(1 for lease in live if lease.is_live) <= project.agent_wip_limit
        assert live.count() <= project.agent_wip_limit  # every holder here is live


def assert_all_or_nothing(issue_id: int, paths: list[str]) -> set[str]:
    """The issue's claims, released or not, are exactly ``paths`` or nothing."""
    rows = sorted(FileClaim.objects.filter(issue_id=issue_id).values_list("path", flat=True))
    assert rows in ([], sorted(paths)), f"issue {issue_id}: partial claim {rows} of {paths}"
    return set(rows)


def assert_json_answer(outcome: Outcome) -> None:
    """An answer from the app (never a 500, never HTML); a 503 is ``unavailable``
    with a Retry-After in seconds."""
    assert outcome.error is None, outcome.error
    assert outcome.status != 500, outcome.body
    assert outcome.content_type.startswith("application/json"), (outcome.status, outcome.body)
    if outcome.status == 503:
        assert outcome.code == "unavailable" and outcome.body["detail"], outcome.body
        assert outcome.retry_after is not None and outcome.retry_after.isdigit()


# --- 1. a gunicorn worker killed with SIGKILL during a claim_files load -----------------

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


def freeze_and_kill(
    server: Gunicorn,
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
                "SELECT state, query FROM pg_stat_activity "
                "WHERE datname = %s AND client_port = ANY(%s)",
                [db_settings()["NAME"], sorted(ports)],
            ).fetchone()
            if row is not None and wanted(row[0] or "", row[1] or ""):
                os.kill(pid, signal.SIGKILL)
                killed = True
                return Kill(pid=pid, state=row[0], query=row[1])
        finally:
            if not killed:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        time.sleep(rng.uniform(0, 0.02))
    return None


def booted_workers(server: Gunicorn) -> list[int]:
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
        assert gunicorn.alive(), gunicorn.log()
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
        match = re.search(r"VALUES\s*\(\s*\d+\s*,\s*(\d+)", first.query)
        assert match, first.query
        killed_issue = int(match.group(1))
        killed = [n for n in outcomes if issues[n].pk == killed_issue]
        assert killed and outcomes[killed[0]].error is not None
        assert not FileClaim.objects.filter(issue_id=killed_issue).exists()
    print(
        f"\nworker kills: {[(k.state, k.query.strip()[:40]) for k in kills]}; requests "
        f"{len(outcomes)}: 201={len(accepted)} 409={len(refused)} dropped={len(died)} "
        f"(of which fully claimed: {held_by_died}); "
        f"claim_conflicts={ClaimConflict.objects.count()}"
    )


# --- 2. PostgreSQL unreachable during a load run ----------------------------------------

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


# --- 3. an agent that stops heartbeating ---------------------------------------------------


def heartbeat_seconds_ago(session: AgentSession, seconds: float) -> None:
    """Move the session's last heartbeat back by the database's clock (invariant 1)."""
    AgentSession.objects.filter(pk=session.pk).update(
        last_heartbeat_at=ExpressionWrapper(
            DbNow() - Value(timedelta(seconds=seconds)), output_field=DateTimeField()
        )
    )


@pytest.mark.django_db
def test_a_silent_agents_lease_claims_and_lock_are_reclaimable_exactly_after_the_ttl(
    api, workspace, project, make_issue, make_session
):
    ttl = settings.PROJEKTOR_SESSION_TTL_SECONDS
    project.agent_wip_limit = 10
    project.save()
    tree = Worktree.objects.create(workspace=workspace, slug="main", name="Main")
    leased, files, run_issue = make_issue(), make_issue(), make_issue(worktree=tree)
    mine, my_run_issue = make_issue(), make_issue(worktree=tree)
    paths = ["src/app.py", "src/models.py"]
    silent, other = make_session("silent"), make_session("other")

    assert post(api, f"/issues/{leased.pk}/claim/", {"session": silent.pk}).status_code == 201
    body = {"issue": files.pk, "paths": paths, "session": silent.pk}
    assert post(api, "/file-claims/", body).status_code == 201
    silent_run = post(api, "/runs/", {"session": silent.pk, "issue": run_issue.pk})
    assert silent_run.status_code == 201 and silent_run.json()["lock_mode"] == "exclusive"

    def claim_lease() -> Any:
        return post(api, f"/issues/{leased.pk}/claim/", {"session": other.pk})

    def claim_paths() -> Any:
        return post(api, "/file-claims/", {"issue": mine.pk, "paths": paths, "session": other.pk})

    def dispatch() -> Any:
        return post(api, "/runs/", {"session": other.pk, "issue": my_run_issue.pk})

    # Silent for TTL - 2 s: still live, everything it holds is refused to others.
    heartbeat_seconds_ago(silent, ttl - 2)
    assert api.get(f"{V1}/sessions/{silent.pk}/").json()["live"] is True
    held = assert_error(claim_lease(), 409, "lease_held")
    assert held["holder"]["session"] == silent.pk
    conflict = assert_error(claim_paths(), 409, "file_conflict")
    assert {c["session"] for c in conflict["conflicts"]} == {silent.pk}
    busy = assert_error(dispatch(), 409, "worktree_busy")
    assert busy["holder"]["session"] == silent.pk
    assert IssueLease.objects.unreleased().filter(session=silent).count() == 2
    assert FileClaim.objects.filter(session=silent, released_at__isnull=True).count() == 2
    assert WorktreeLock.objects.filter(session=silent, released_at__isnull=True).count() == 1
    assert ClaimConflict.objects.count() == len(paths)

    # Silent for TTL + 2 s: dead; the next claimer reclaims each as expired.
    heartbeat_seconds_ago(silent, ttl + 2)
    assert api.get(f"{V1}/sessions/{silent.pk}/").json()["live"] is False
    assert claim_lease().status_code == 201
    claimed = claim_paths()
    assert claimed.status_code == 201, claimed.content
    assert sorted(claimed.json()["reclaimed"]) == sorted(paths)
    ran = dispatch()
    assert ran.status_code == 201, ran.content
    assert ran.json()["worktree"] == "main" and ran.json()["status"] == "running"

    expired = ReleaseReason.EXPIRED
    assert IssueLease.objects.get(issue=leased, session=silent).release_reason == expired
    assert set(
        FileClaim.objects.filter(session=silent).values_list("release_reason", flat=True)
    ) == {expired}
    assert WorktreeLock.objects.get(session=silent).release_reason == expired
    assert ClaimConflict.objects.count() == len(paths), "a reclaim logs no conflict"
    assert Run.objects.get(pk=silent_run.json()["id"]).status == "running"  # a crash is no exit
    assert Run.objects.filter(session=other, error="worktree_busy").count() == 1


# --- the 503 middleware, in process (SQLite and PostgreSQL) --------------------------------


def raising(error: Exception) -> Callable[..., Any]:
    def raise_it(*args: Any, **kwargs: Any) -> Any:
        raise error

    return raise_it


def sqlite_error(kind: type[Exception], message: str) -> Exception:
    """A Django database error as the SQLite backend raises it (driver error as cause)."""
    error = kind(message)
    error.__cause__ = sqlite3.OperationalError(message)
    return error


@pytest.fixture
def quiet_api(api: APIClient) -> APIClient:
    """The API client, answering 500s instead of raising the view's exception."""
    api.raise_request_exception = False
    return api


def claim_body(issue: Issue) -> dict[str, Any]:
    return {"issue": issue.pk, "paths": ["src/a.py"]}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "error",
    [
        OperationalError("connection failed: server closed the connection unexpectedly"),
        InterfaceError("the connection is closed"),
        sqlite_error(OperationalError, "database is locked"),
    ],
    ids=["operational", "interface", "sqlite-locked"],
)
def test_a_database_outage_under_api_is_503_json_with_retry_after(
    quiet_api, issue, monkeypatch, error
):
    monkeypatch.setattr(file_claims, "claim_files", raising(error))

    response = post(quiet_api, "/file-claims/", claim_body(issue))

    body = assert_error(response, 503, "unavailable")
    assert body == {"code": "unavailable", "detail": body["detail"]}
    assert response["Retry-After"].isdigit() and int(response["Retry-After"]) > 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "error",
    [
        IntegrityError("duplicate key value violates unique constraint"),
        ProgrammingError("relation does not exist"),
        sqlite_error(OperationalError, "no such table: issue_file_claims"),
        sqlite_error(InterfaceError, "Error binding parameter 1"),
    ],
    ids=["integrity", "programming", "sqlite-no-such-table", "sqlite-binding"],
)
def test_a_bug_is_not_an_outage(quiet_api, issue, monkeypatch, error):
    monkeypatch.setattr(file_claims, "claim_files", raising(error))

    response = post(quiet_api, "/file-claims/", claim_body(issue))

    assert_error(response, 500, "server_error")
    assert not response.has_header("Retry-After")
    assert not is_database_unavailable(error)


@pytest.mark.django_db
def test_an_outage_in_authentication_and_with_debug_is_still_503_json(
    quiet_api, issue, monkeypatch, settings
):
    settings.DEBUG = True  # no technical 500 page either
    monkeypatch.setattr(ApiKeyAuthentication, "authenticate", raising(OperationalError("down")))

    assert_error(post(quiet_api, "/file-claims/", claim_body(issue)), 503, "unavailable")
    assert_error(quiet_api.get(f"{V1}/issues/"), 503, "unavailable")


@pytest.mark.django_db
def test_pages_get_a_plain_503_page_and_session_auth_on_the_api_a_json_one(client, monkeypatch):
    client.raise_request_exception = False
    client.cookies["sessionid"] = "a-session-the-database-cannot-load"
    monkeypatch.setattr(SessionStore, "load", raising(OperationalError("down")))

    page = client.get("/workspaces/")
    assert page.status_code == 503
    assert page["Content-Type"].startswith("text/html") and page["Retry-After"].isdigit()
    assert b"unavailable" in page.content and b"Traceback" not in page.content

    assert_error(client.get(f"{V1}/issues/?workspace=acme"), 503, "unavailable")


@pytest.mark.django_db
def test_mcp_answers_503_json_with_retry_after(client, raw_key, monkeypatch):
    client.raise_request_exception = False
    monkeypatch.setattr(ApiKeyAuthentication, "authenticate", raising(OperationalError("down")))
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

    response = client.post(
        "/mcp",
        message,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw_key}",
        HTTP_ACCEPT="application/json, text/event-stream",
    )

    assert_error(response, 503, "unavailable")
    assert response["Retry-After"].isdigit()


@pytest.mark.parametrize(
    ("error", "status"),
    [(OperationalError("down"), 503), (IntegrityError("duplicate"), 500)],
    ids=["outage", "bug"],
)
def test_an_outage_raised_by_an_inner_middleware_is_503_too(error, status):
    """Django turns an error in another middleware into a 500 at that layer; the
    outer middleware replaces it when the error was an outage."""
    inner = convert_exception_to_response(raising(error))
    response = DatabaseUnavailableMiddleware(inner)(RequestFactory().get(f"{V1}/issues/"))

    assert response.status_code == status
    assert json.loads(response.content)["code"] == (
        "unavailable" if status == 503 else "server_error"
    )
    assert response.has_header("Retry-After") == (status == 503)
