"""/events/ and /events/stream/ served by gunicorn (the bench's harness), with real
clients: a long-poll on one app server answered when another commits, waiting
requests that hold no PostgreSQL connection, and an SSE client that reconnects with
``Last-Event-ID`` while events are written.

Both databases: PostgreSQL wakes waiters through LISTEN/NOTIFY, SQLite's waiters
poll. The servers use the test database (on SQLite a file copy, ``file_database``);
what the test process writes it writes from threads with their own connections.
"""

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

from benchmarks import server as harness
from coordination.models import ApiKey, Event, Workspace
from coordination.services import messages
from tests.api_helpers import V1
from tests.coordination.races.conftest import run_in_threads
from tests.faults.client import wait_until
from tests.faults.database import (
    admin_connection,
    db_settings,
    pg_client_ports,
)

pytestmark = pytest.mark.django_db(transaction=True)

WAIT_SECONDS = 30
# A woken waiter answers long before its wait ends: far past any wake-up on a
# loaded machine (the latency is logged), well short of the wait itself.
WOKEN_WITHIN = 15
DEADLINE = 90  # seconds, for anything a step waits on
WAITERS = 6  # on the waiting server's 2 workers × 4 threads
STREAM_SECONDS = 2


def in_thread(call: Callable[[], Any]) -> Any:
    [result] = run_in_threads(call, [()])
    if isinstance(result, Exception):
        raise result
    return result


def table_ids(workspace: Workspace) -> list[int]:
    return in_thread(
        lambda: list(
            Event.objects.filter(workspace=workspace).order_by("id").values_list("id", flat=True)
        )
    )


def post_directly(workspace: Workspace, body: str) -> int:
    """A post through the ORM of this process (another app server, to gunicorn's
    workers); the id of its event."""

    def post() -> int:
        message = messages.post_message(workspace=workspace, scope="project:core", body=body)
        return int(Event.objects.get(data__message=message.pk).pk)

    return in_thread(post)


@dataclass
class Servers:
    waiting: harness.Server  # 2 workers: where the waiters and streams are
    writing: harness.Server  # another app server: where writes are sent
    key: str


def environment(file_database: Path | None) -> dict[str, str]:
    """The app's environment on the test database, with short streams."""
    on_file = {} if file_database is None else {"DATABASE_URL": f"sqlite:///{file_database}"}
    return harness.environment_on_this_database(
        {
            **on_file,
            "SECRET_KEY": "events-live-only",
            "PROJEKTOR_EVENT_STREAM_SECONDS": str(STREAM_SECONDS),
            "PROJEKTOR_EVENT_STREAM_KEEPALIVE_SECONDS": "1",
            "REDIS_URL": None,
        }
    )


@pytest.fixture
def key(workspace, project, file_database) -> str:
    return str(in_thread(lambda: ApiKey.issue(workspace, "fleet")[1]))


@pytest.fixture
def servers(key: str, tmp_path: Path, file_database) -> Iterator[Servers]:
    """The waiting server (2 workers × 4 threads) and another to write through."""
    env = environment(file_database)
    with ExitStack() as stack:
        waiting = stack.enter_context(
            harness.gunicorn(env=env, workers=2, threads=4, log_path=tmp_path / "waiting.log")
        )
        writing = stack.enter_context(
            harness.gunicorn(env=env, workers=1, threads=2, log_path=tmp_path / "writing.log")
        )
        yield Servers(waiting=waiting, writing=writing, key=key)


@pytest.fixture
def server(key: str, tmp_path: Path, file_database) -> Iterator[harness.Server]:
    """One server of 2 workers: the stream is read and written through it."""
    env = environment(file_database)
    with harness.gunicorn(env=env, workers=2, threads=4, log_path=tmp_path / "server.log") as one:
        yield one


def client(server: harness.Server, key: str, timeout: float = WAIT_SECONDS + 30) -> httpx.Client:
    return httpx.Client(
        base_url=f"http://{server.host}:{server.port}{V1}",
        headers={"Authorization": f"Bearer {key}"},
        timeout=timeout,
    )


# --- the long-poll --------------------------------------------------------------------


@dataclass
class Waiter:
    """GET /events/?after=…&wait=30 in a thread; its answer and when it came."""

    server: harness.Server
    key: str
    after: int
    answer: dict[str, Any] | None = None
    status: int | None = None
    answered_at: float | None = None
    error: BaseException | None = None
    thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with client(self.server, self.key) as http:
                response = http.get("/events/", params={"after": self.after, "wait": WAIT_SECONDS})
            self.status, self.answer = response.status_code, response.json()
        except BaseException as error:  # noqa: BLE001 - the test reports it
            self.error = error
        finally:
            self.answered_at = time.monotonic()

    def result(self) -> dict[str, Any]:
        self.thread.join(DEADLINE)
        assert not self.thread.is_alive(), "a waiter never answered"
        assert self.error is None, self.error
        assert self.status == 200, self.answer
        assert self.answer is not None
        return self.answer


def listening(server: harness.Server, db_file: Path | None) -> bool:
    """PostgreSQL: a worker has started its listener, so a request has come to its
    wait. (SQLite has none: True.)"""
    if db_file is not None:
        return True
    port = int(db_settings()["PORT"] or 5432)
    ports = sorted(p for pid in server.worker_pids() for p in pg_client_ports(pid, port))
    with admin_connection() as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
            " AND client_port = ANY(%s) AND query LIKE 'LISTEN %%'",
            [db_settings()["NAME"], ports],
        ).fetchone()
    return bool(row and row[0])


def held_connections(server: harness.Server) -> int:
    """PostgreSQL connections the server's workers hold for requests: the backends
    other than each worker's LISTEN connection."""
    port = int(db_settings()["PORT"] or 5432)
    ports = sorted(p for pid in server.worker_pids() for p in pg_client_ports(pid, port))
    if not ports:
        return 0
    with admin_connection() as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
            " AND client_port = ANY(%s) AND query NOT LIKE 'LISTEN %%'",
            [db_settings()["NAME"], ports],
        ).fetchone()
    return int(row[0]) if row else 0


def accepted(server: harness.Server) -> int:
    """HTTP connections the server's workers have accepted and not closed."""
    inodes = set()
    for pid in server.worker_pids():
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
        except OSError:
            continue
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, inode = fields[1], fields[3], fields[9]
        count += (
            state == "01" and int(local.rsplit(":", 1)[1], 16) == server.port and (inode in inodes)
        )
    return count


def answered_with(waiters: list[Waiter], event_id: int, since: float) -> list[float]:
    """Each waiter's answer holds the event; the seconds from ``since`` (just before
    the write) to it."""
    latencies = []
    for waiter in waiters:
        answer = waiter.result()
        assert [e["id"] for e in answer["events"]] == [event_id], answer
        assert answer["next"] == event_id
        assert waiter.answered_at is not None
        latencies.append(waiter.answered_at - since)
    return latencies


def test_waiters_on_one_server_answer_when_another_commits_holding_no_connection(
    servers, workspace, file_database
):
    """Waiters on a two-worker server: a post through another server (another
    process) answers them all at once, and so does a commit of this process; while
    they wait on PostgreSQL, the server's workers hold no database connection for
    them (SQLite's waiters keep their open files, which hold no lock: the post through
    the other server commits meanwhile)."""
    newest = post_directly(workspace, "before")

    # 1. While WAITERS requests wait, their workers hold no PostgreSQL connection (the
    # server is fresh: no thread kept one from an earlier request). Each request reads
    # once (a connection), then gives it back and sleeps.
    waiters = [Waiter(servers.waiting, servers.key, after=newest) for _ in range(WAITERS)]
    wait_until(lambda: accepted(servers.waiting) == WAITERS, DEADLINE, "the waiters to connect")
    wait_until(
        lambda: (
            listening(servers.waiting, file_database)
            and (file_database is not None or held_connections(servers.waiting) == 0)
        ),
        DEADLINE,
        "the waiting workers to listen, holding no PostgreSQL connection",
    )
    assert not any(w.answered_at for w in waiters), "a waiter answered with nothing to answer"

    # 2. A post through the other server answers every waiter.
    committed = time.monotonic()  # latencies count from just before the write
    with client(servers.writing, servers.key) as http:
        response = http.post("/messages/", json={"scope": "project:core", "body": "through B"})
    assert response.status_code == 201, response.text
    posted = in_thread(lambda: Event.objects.get(data__message=response.json()["id"]).pk)
    latencies = answered_with(waiters, posted, committed)
    print(f"another server's commit answered {WAITERS} waiters in {max(latencies):.3f} s at most")
    assert max(latencies) < WOKEN_WITHIN

    # 3. So does a commit of this process (PostgreSQL: NOTIFY; SQLite: the poll).
    waiters = [Waiter(servers.waiting, servers.key, after=posted) for _ in range(WAITERS)]
    wait_until(lambda: accepted(servers.waiting) == WAITERS, DEADLINE, "the waiters to connect")
    committed = time.monotonic()
    direct = post_directly(workspace, "through the ORM")
    latencies = answered_with(waiters, direct, committed)
    print(
        f"this process's commit answered {WAITERS} waiters in {max(latencies):.3f} s at most"
        f" ({connection.vendor})"
    )
    assert max(latencies) < WOKEN_WITHIN


# --- the stream -----------------------------------------------------------------------


@dataclass
class StreamClient:
    """An EventSource as a browser runs it: reads frames, and when the server ends
    the stream reconnects with the ``Last-Event-ID`` of the last event it saw."""

    server: harness.Server
    key: str
    ids: list[int] = field(default_factory=list)
    keepalives: int = 0
    connections: int = 0
    missed: int = 0
    error: BaseException | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with client(self.server, self.key, timeout=STREAM_SECONDS + 30) as http:
                while not self.stop.is_set():
                    headers = {"Accept": "text/event-stream"}
                    if self.ids:
                        headers["Last-Event-ID"] = str(self.ids[-1])
                    with http.stream("GET", "/events/stream/", headers=headers) as response:
                        assert response.status_code == 200, response.read()
                        assert response.headers["content-type"].startswith("text/event-stream")
                        self.connections += 1
                        self._read(response.iter_lines())
        except BaseException as error:  # noqa: BLE001 - the test reports it
            self.error = error

    def _read(self, lines: Iterator[str]) -> None:
        frame: dict[str, str] = {}
        for line in lines:
            if line.startswith(":"):
                self.keepalives += 1
            elif line:
                name, _, value = line.partition(": ")
                frame[name] = value
            elif frame:  # a blank line ends a frame
                if frame.get("event") == "missed":
                    self.missed += 1
                elif "id" in frame:
                    shown = json.loads(frame["data"])
                    assert int(frame["id"]) == shown["id"] and frame["event"] == shown["type"]
                    self.ids.append(shown["id"])
                frame = {}

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(STREAM_SECONDS + DEADLINE)
        assert not self.thread.is_alive(), "the stream client never stopped"
        assert self.error is None, self.error


def test_an_sse_client_that_reconnects_sees_every_event_once_in_order(server, key, workspace):
    """The server ends each stream after STREAM_SECONDS; the client reconnects with
    Last-Event-ID while events are written in bursts, some through the server (any
    of its workers), some by this process. Afterwards it has seen every event once,
    in order, and keep-alive comments between the bursts."""
    sse = StreamClient(server, key)
    written = 0
    bursts = 0
    with client(server, key) as http:
        deadline = time.monotonic() + DEADLINE
        while sse.connections < 4 and time.monotonic() < deadline and sse.error is None:
            bursts += 1
            for n in range(3):
                if n % 2:
                    post_directly(workspace, f"burst {bursts}.{n}")
                else:
                    response = http.post(
                        "/messages/", json={"scope": "project:core", "body": f"burst {bursts}"}
                    )
                    assert response.status_code == 201, response.text
                written += 1
            # Wait for the client to see the burst, then for a keep-alive: a quiet second.
            table = table_ids(workspace)
            wait_until(lambda t=table: sse.ids[-1:] == t[-1:] or sse.error is not None,
                       DEADLINE, "the stream to show the burst")  # fmt: skip
            seen = sse.keepalives
            wait_until(lambda s=seen: sse.keepalives > s or sse.error is not None,
                       DEADLINE, "a keep-alive")  # fmt: skip
    sse.finish()

    table = table_ids(workspace)
    assert sse.ids == table, "the stream lost, repeated or reordered events"
    assert len(set(sse.ids)) == len(sse.ids)
    assert sse.connections >= 3, "the server never ended a stream"
    assert sse.keepalives >= 1 and sse.missed == 0
    print(
        f"{len(table)} events over {sse.connections} streams,"
        f" {sse.keepalives} keep-alives, {bursts} bursts"
    )
