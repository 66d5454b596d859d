"""The cursor guarantee under real concurrency (invariant 12 (one event per change), docs/api.md
"Events"): a reader that always passes back ``next`` sees every event exactly once, in id order,
while many writers commit, even while a writer is held between drawing its event ids
and its commit and others commit greater ids past it: ids committing out of order,
which is how an outbox loses events.

Writers and readers are threads, each with its own database connection. On
PostgreSQL they use the test database. SQLite's test database lives in memory with a
shared cache, where a second writer fails at once ("database table is locked")
instead of queuing as processes sharing a file do: there the threads race on a file
copy of it (``file_database``), in WAL mode with the deployment's busy timeout.
"""

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db import connection, connections

from coordination import feed
from coordination.models import ApiKey, Event, EventType, Workspace
from coordination.services import events, file_claims, leases, messages
from tests.conftest import make_client
from tests.coordination.races.conftest import RACER_TIMEOUT, hold_and_race, run_in_threads

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS = 16
# Rounds per writer, each four or six transactions of one event: at least ROUNDS, and
# on until the holds are done (writers go on beside every hold), at most MAX_ROUNDS.
ROUNDS = 8
MAX_ROUNDS = 60
HOLDS = 6  # times a writer is held between its event insert and its commit
# A hold lasts until another writer meets it and the readers have read twice: far
# less than SQLite's busy timeout (20 s), after which the queued writers would fail.
DEADLINE = 120  # seconds: for the whole race, and for anything one step waits on
POLL = 0.002  # seconds between two checks of a condition (never a guessed wait)


# --- the database the threads use ------------------------------------------------------


def in_thread(call: Callable[[], Any]) -> Any:
    """``call()`` on a connection of its own (on SQLite: the race's file)."""
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


# --- holding a writer between its event insert and its commit -------------------------


@dataclass
class Holds:
    """Arms ``events.write`` so that the next writer to insert its events waits, its
    ids drawn and its transaction open, until the race lets it go."""

    original: Callable[..., None]
    armed: threading.Event = field(default_factory=threading.Event)
    holding: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    held_ids: list[int] = field(default_factory=list)
    jitter: random.Random = field(default_factory=lambda: random.Random(17))

    def write(self, pending: list[Any]) -> None:
        self.original(pending)
        with self.lock:
            take = self.armed.is_set()
            self.armed.clear()
            pause = self.jitter.random() < 0.25
            pause_for = self.jitter.uniform(0, 0.002)
        if take:
            with connection.cursor() as cursor:
                if connection.vendor == "postgresql":  # the last id this transaction drew
                    cursor.execute("SELECT currval('coordination_event_id_seq')")
                else:  # the only writer: its ids are the newest
                    cursor.execute("SELECT MAX(id) FROM coordination_event")
                self.held_ids.append(int(cursor.fetchone()[0]))
            self.holding.set()
            assert self.released.wait(DEADLINE), "the race never let the held writer go"
        elif pause:
            # Shake the interleavings: commit a little after the insert now and then.
            time.sleep(pause_for)


@pytest.fixture
def holds(monkeypatch: pytest.MonkeyPatch) -> Holds:
    holds = Holds(original=events.write)
    monkeypatch.setattr(events, "write", holds.write)
    return holds


def committed_past(event_id: int) -> bool:
    """Whether an event with a greater id has committed (PostgreSQL: this thread's
    connection sees only commits)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT 1 FROM coordination_event WHERE id > %s)", [event_id])
        return bool(cursor.fetchone()[0])


# --- the writers and the readers -------------------------------------------------------


@dataclass
class Race:
    workspace: Workspace
    done: threading.Event = field(default_factory=threading.Event)
    holds_done: threading.Event = field(default_factory=threading.Event)
    rounds: dict[int, int] = field(default_factory=dict)  # per writer, done
    in_flight: int = 0
    errors: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def op(self, call: Callable[[], Any]) -> None:
        with self.lock:
            self.in_flight += 1
        try:
            call()
        finally:
            with self.lock:
                self.in_flight -= 1


def writer(race: Race, n: int, issue_id: int, session_id: int) -> None:
    """Claims, releases, posts and leases on an issue of its own."""
    workspace = race.workspace
    rng = random.Random(n)
    for round_number in range(MAX_ROUNDS):
        if round_number >= ROUNDS and race.holds_done.is_set():
            break
        race.rounds[n] = round_number
        paths = [f"w{n}/{p}.py" for p in rng.sample(range(6), 2)]
        race.op(
            lambda paths=paths: file_claims.claim_files(
                workspace=workspace, issue_id=issue_id, paths=paths, session_id=session_id
            )
        )
        race.op(
            lambda body=f"round {round_number}": messages.post_message(
                workspace=workspace, scope=f"issue:{issue_id}", body=body
            )
        )
        if round_number % 2 == 0:
            race.op(
                lambda: leases.claim_issue(
                    workspace=workspace, issue_id=issue_id, session_id=session_id
                )
            )
            race.op(
                lambda: leases.release_issue(
                    workspace=workspace, issue_id=issue_id, session_id=session_id
                )
            )
        race.op(lambda paths=paths: file_claims.release_files(
            workspace=workspace, issue_id=issue_id, paths=paths[:1]
        ))  # fmt: skip
        race.op(lambda: file_claims.release_files(workspace=workspace, issue_id=issue_id))


class Reader(threading.Thread):
    """Tails the workspace's events by cursor, without waiting, until the writers are
    done and a read after that finds nothing; ``read(after, limit)`` answers
    ``(ids, next)``."""

    def __init__(self, race: Race, read: Callable[[int, int], tuple[list[int], int]]) -> None:
        super().__init__(daemon=True)
        self.race, self.read = race, read
        self.seen: list[int] = []
        self.reads = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(3)
        after = 0
        try:
            while True:
                finished = self.race.done.is_set()  # before the read: it sees every commit
                found, after = self.read(after, rng.choice((1, 3, 10, 100)))
                self.seen += found
                self.reads += 1
                if finished and not found:
                    return
        except BaseException as error:  # noqa: BLE001 - the test reports it
            self.error = error
        finally:
            connections.close_all()


def feed_reader(race: Race) -> Reader:
    """Reads through the feed itself, with a short bound on its wait for open writers
    (past it a read answers nothing new): it reads often, held writers or not."""

    def read(after: int, limit: int) -> tuple[list[int], int]:
        page = feed.read(
            race.workspace,
            after=after,
            filters=feed.EventFilter(),
            limit=limit,
            writers_bound=0.05,
        )
        return [event.pk for event in page.events], page.next

    return Reader(race, read)


def api_reader(race: Race, raw_key: str) -> Reader:
    """Reads through GET /events/ (unthrottled: a rate-limit counter is a write, which on
    SQLite would queue behind a held writer)."""
    client = make_client(raw_key)

    def read(after: int, limit: int) -> tuple[list[int], int]:
        response = client.get(f"/api/v1/events/?{urlencode({'after': after, 'limit': limit})}")
        assert response.status_code == 200, response.content
        body = response.json()
        return [event["id"] for event in body["events"]], body["next"]

    return Reader(race, read)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL)
    return True


def newest_seen(readers: list[Reader]) -> int:
    return max((reader.seen[-1] for reader in readers if reader.seen), default=0)


def assert_saw_everything_once_in_order(reader: Reader, table: list[int]) -> None:
    assert reader.error is None, reader.error
    assert len(reader.seen) == len(set(reader.seen)), "an event was seen twice"
    missing = sorted(set(table) - set(reader.seen))
    assert not missing, f"the reader never saw {len(missing)} events: {missing[:20]}"
    assert reader.seen == table


# --- the race --------------------------------------------------------------------------


@pytest.fixture
def racers(workspace, project, make_issue, make_session):
    project.agent_wip_limit = 1000
    project.save()
    issues = [make_issue(title=f"Issue {n}") for n in range(WRITERS)]
    sessions = [make_session(f"writer-{n}") for n in range(WRITERS)]
    return issues, sessions


def test_readers_following_next_see_every_event_once_in_order_under_16_writers(
    workspace, racers, file_database, holds, settings
):
    """Sixteen writers on distinct issues; a writer is held now and then with its
    event ids drawn and its transaction open, while the others go on; two readers
    tail by cursor (the feed itself and GET /events/). Afterwards each reader's ids
    are the table's, in order, none twice."""
    issues, sessions = racers
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"key": None, "anon": None},
    }
    raw_key = in_thread(lambda: ApiKey.issue(workspace, "reader")[1])
    race = Race(workspace=workspace)
    readers = [feed_reader(race), api_reader(race, raw_key)]
    threads = [
        threading.Thread(target=run_writer, args=(race, n, issue.pk, session.pk), daemon=True)
        for n, (issue, session) in enumerate(zip(issues, sessions, strict=True))
    ]
    for thread in [*readers, *threads]:
        thread.start()

    held = [hold_once(holds, race, readers, threads) for _ in range(HOLDS)]
    race.holds_done.set()
    holds.released.set()

    for thread in threads:
        thread.join(DEADLINE)
    assert not any(t.is_alive() for t in threads), "a writer never finished"
    assert not race.errors, race.errors[:3]
    race.done.set()
    for reader in readers:
        reader.join(DEADLINE)
        assert not reader.is_alive(), "a reader never caught up"

    table = table_ids(workspace)
    assert len(table) == WRITERS + sum(  # the registrations, then each round's events
        4 * (done + 1) + 2 * (done // 2 + 1) for done in race.rounds.values()
    )
    for reader in readers:
        assert_saw_everything_once_in_order(reader, table)
    # No reader went past a held id while it was open: it waited, and saw it once after.
    assert not any(hold.passed_while_held for hold in held)
    met = sum(hold.met for hold in held)
    assert met >= 1, "no writer ever met a held one: the race proved nothing"
    print(
        f"{len(table)} events, {len(holds.held_ids)} holds ({met} met by another writer),"
        f" reads: {[r.reads for r in readers]}"
    )


@dataclass(frozen=True)
class Hold:
    met: bool  # another writer came to the held one: committed past it, or queued
    passed_while_held: bool  # a reader went past the held id before it committed


def hold_once(
    holds: Holds, race: Race, readers: list[Reader], writers: list[threading.Thread]
) -> Hold:
    """Hold the next writer to insert its events until another writer meets it: on
    PostgreSQL, commits a greater id (writers never wait for each other, so ids now
    commit out of order); on SQLite, queues at BEGIN IMMEDIATE. Then until both
    readers have read twice since. Then let it commit."""

    def writing(others: int = 0) -> bool:
        """Whether more than ``others`` writers are still at work."""
        return sum(writer.is_alive() for writer in writers) > others

    holds.holding.clear()
    holds.released.clear()
    holds.armed.set()
    if not wait_for(lambda: holds.holding.is_set() or not writing(), "a writer to be held"):
        return Hold(met=False, passed_while_held=False)
    if not holds.holding.is_set():  # the writers finished first
        holds.armed.clear()
        return Hold(met=False, passed_while_held=False)
    held_id = holds.held_ids[-1]

    def met() -> bool:
        if connection.vendor == "postgresql":
            return committed_past(held_id)
        return race.in_flight > 1  # another writer's transaction waits for the held one

    # (The held writer is at work: another is, too, or none is left to meet it.)
    did_meet = wait_for(lambda: met() or not writing(1), "a writer to meet the hold") and met()
    reads = [reader.reads for reader in readers]
    wait_for(  # each reader has begun and ended a read since: two reads
        lambda: all(r.reads >= n + 2 for r, n in zip(readers, reads, strict=True)),
        "the readers to read during the hold",
    )
    passed = newest_seen(readers) > held_id
    holds.released.set()
    return Hold(met=did_meet, passed_while_held=passed)


def run_writer(race: Race, n: int, issue_id: int, session_id: int) -> None:
    try:
        writer(race, n, issue_id, session_id)
    except BaseException as error:  # noqa: BLE001 - the test reports it
        race.errors.append(error)
    finally:
        connections.close_all()


# --- the reader's wait for open writers (PostgreSQL) -----------------------------------


def announce(workspace: Workspace) -> int:
    with events.change():
        events.record(workspace.pk, EventType.MESSAGE_POSTED)
    return int(
        Event.objects.filter(workspace=workspace, type=EventType.MESSAGE_POSTED).latest("id").pk
    )


def read_ids(workspace: Workspace, *, after: int, bound: float) -> tuple[list[int], int]:
    def read() -> tuple[list[int], int]:
        page = feed.read(
            workspace, after=after, filters=feed.EventFilter(), limit=100, writers_bound=bound
        )
        return [event.pk for event in page.events], page.next

    return in_thread(read)


@pytest.mark.postgres
def test_a_reader_never_passes_an_id_whose_writer_is_still_open(workspace):
    """The first writer has drawn its id and not committed; the second draws a greater
    one and commits without waiting for the first. A reader then answers nothing new
    (after its bound) rather than the second's id, which would skip the first's for
    good; once the first commits, it answers both, in order."""
    seen: dict[str, Any] = {}

    def first(let_racer_in: Callable[[], None]) -> int:
        mine = announce(workspace)  # the change block ends; the transaction does not
        let_racer_in()  # returns once the second has committed (it waits for nothing)
        seen["committed past"] = committed_past(mine)
        seen["while open"] = read_ids(workspace, after=mine - 1, bound=0.2)
        return mine

    mine, theirs = hold_and_race(first, lambda: announce(workspace))
    assert isinstance(mine, int) and isinstance(theirs, int), (mine, theirs)
    assert theirs > mine and seen["committed past"], "the ids did not commit out of order"
    assert seen["while open"] == ([], mine - 1)
    assert read_ids(workspace, after=mine - 1, bound=5) == ([mine, theirs], theirs)


@pytest.mark.postgres
def test_an_open_writer_holds_up_only_readers_of_its_own_workspace(workspace, other_workspace):
    seen: dict[str, Any] = {}

    def first(let_racer_in: Callable[[], None]) -> None:
        announce(workspace)
        seen["theirs"] = in_thread(lambda: announce(other_workspace))
        seen["read"] = read_ids(other_workspace, after=0, bound=RACER_TIMEOUT)

    [result, _] = hold_and_race(first, lambda: None)
    assert result is None, result
    assert seen["read"] == ([seen["theirs"]], seen["theirs"])
