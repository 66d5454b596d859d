"""Reading the event log (``coordination.feed``): by cursor, with filters, waiting
for the next event without holding a database connection, woken by this process's
commits, by PostgreSQL's notifications, or by SQLite's poll."""

import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from django.db import connection, connections

from coordination import feed
from coordination.db import sql
from coordination.db.rows import execute
from coordination.models import Event, EventType, Workspace
from coordination.services import events, messages
from tests.faults.client import wait_until

# A waiter that has not answered by then was not woken (its wait is WAIT_SECONDS):
# far beyond any wake-up on a loaded machine, well short of the wait's own end.
WAIT_SECONDS = 30
WOKEN_WITHIN = 15
DEADLINE = 60  # seconds, for anything a test waits on


def write(workspace: Workspace, type: str = EventType.ISSUE_CREATED, **fields: Any) -> Event:
    with events.change():
        events.record(workspace.pk, type, **fields)
    return Event.objects.filter(workspace=workspace).latest("id")


def notify_only(workspace_ids: list[int]) -> None:
    """``feed.committed`` as another app server's commit looks from here: the NOTIFY
    (PostgreSQL), and no wake of this process's waiters."""
    if connection.vendor == "postgresql":
        execute(sql.notify(workspace_ids=workspace_ids))


def page_of(workspace: Workspace, after: int = 0, limit: int = 100, **filters: Any) -> feed.Page:
    return feed.read(workspace, after=after, filters=feed.EventFilter(**filters), limit=limit)


def ids(page: feed.Page) -> list[int]:
    return [event.pk for event in page.events]


# --- read -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_read_answers_the_events_after_the_cursor_in_id_order(workspace, other_workspace):
    written = [write(workspace).pk for _ in range(5)]
    write(other_workspace)

    first = page_of(workspace, limit=2)
    assert (ids(first), first.next, first.missed) == (written[:2], written[1], False)
    rest = page_of(workspace, after=first.next)
    assert (ids(rest), rest.next) == (written[2:], written[4])
    # Nothing new: the cursor stays where it was.
    empty = page_of(workspace, after=rest.next)
    assert (ids(empty), empty.next, empty.missed) == ([], rest.next, False)


@pytest.mark.django_db
def test_read_filters_by_type_project_issue_agent_and_session(
    workspace, project, issue, make_session
):
    session = make_session("coder-1")
    other = make_session("coder-2")
    granted = write(
        workspace,
        EventType.LEASE_GRANTED,
        project_id=project.pk,
        issue_id=issue.pk,
        session_id=session.pk,
        agent_id=session.agent_id,
    )
    released = write(
        workspace,
        EventType.LEASE_RELEASED,
        project_id=project.pk,
        issue_id=issue.pk,
        session_id=other.pk,
        agent_id=other.agent_id,
    )
    posted = write(workspace, EventType.MESSAGE_POSTED)

    leases = frozenset({EventType.LEASE_GRANTED, EventType.LEASE_RELEASED})
    assert ids(page_of(workspace, types=leases)) == [granted.pk, released.pk]
    assert ids(page_of(workspace, types=frozenset({EventType.MESSAGE_POSTED}))) == [posted.pk]
    assert ids(page_of(workspace, project_id=project.pk)) == [granted.pk, released.pk]
    assert ids(page_of(workspace, issue_id=issue.pk, agent_id=other.agent_id)) == [released.pk]
    registered = Event.objects.get(type=EventType.SESSION_REGISTERED, session_id=session.pk)
    assert ids(page_of(workspace, session_id=session.pk)) == [registered.pk, granted.pk]
    assert ids(page_of(workspace, session_id=session.pk, types=leases)) == [granted.pk]
    # A page of filtered events moves the cursor to the last one it shows.
    assert page_of(workspace, issue_id=issue.pk, limit=1).next == granted.pk
    assert ids(page_of(workspace, agent_id=session.agent_id, types=leases)) == [granted.pk]


@pytest.mark.django_db
def test_a_cursor_before_the_pruned_events_is_told_it_missed_them(workspace):
    written = [write(workspace).pk for _ in range(4)]
    # What prune_events does: delete the oldest, and say up to where.
    Event.objects.filter(pk__in=written[:2]).delete()
    Workspace.objects.filter(pk=workspace.pk).update(events_pruned_through=written[1])

    page = page_of(workspace)
    assert (ids(page), page.next, page.missed) == (written[2:], written[3], True)
    assert page_of(workspace, after=written[0]).missed
    assert not page_of(workspace, after=written[1]).missed

    # Nothing left after the prune: next moves past what was pruned, so the
    # next read does not report it again.
    Event.objects.filter(pk__in=written[2:]).delete()
    Workspace.objects.filter(pk=workspace.pk).update(events_pruned_through=written[3])
    page = page_of(workspace, after=written[0])
    assert (ids(page), page.next, page.missed) == ([], written[3], True)
    again = page_of(workspace, after=page.next)
    assert (ids(again), again.next, again.missed) == ([], written[3], False)


# --- wait_for -------------------------------------------------------------------------


@pytest.mark.django_db
def test_wait_for_answers_at_once_when_there_are_events(workspace, monkeypatch):
    event = write(workspace)

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("waited although there were events")

    monkeypatch.setattr(feed.wakeups, "wait", never)
    page = feed.wait_for(lambda: page_of(workspace), seconds=WAIT_SECONDS)
    assert ids(page) == [event.pk]


@pytest.mark.django_db
def test_wait_for_with_nothing_to_find_ends_with_an_empty_page(workspace):
    event = write(workspace)
    page = feed.wait_for(lambda: page_of(workspace, after=event.pk), seconds=0.3)
    assert (ids(page), page.next, page.missed) == ([], event.pk, False)


class Waiter(threading.Thread):
    """``wait_for`` in a thread of its own (its own connection), as a request would."""

    def __init__(self, workspace: Workspace, *, after: int) -> None:
        super().__init__(daemon=True)
        self.workspace, self.after = workspace, after
        self.page: feed.Page | None = None
        self.error: BaseException | None = None
        self.started_at = self.answered_at = 0.0

    def run(self) -> None:
        try:
            self.started_at = time.monotonic()
            self.page = feed.wait_for(
                lambda: page_of(self.workspace, after=self.after), seconds=WAIT_SECONDS
            )
            self.answered_at = time.monotonic()
        except BaseException as error:  # noqa: BLE001 - the test reports it
            self.error = error
        finally:
            connections.close_all()

    def answer(self) -> feed.Page:
        self.join(DEADLINE)
        assert not self.is_alive(), "the waiter never answered"
        assert self.error is None, self.error
        assert self.page is not None
        return self.page


def waiting(waiter: Waiter, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Start ``waiter`` and return once it sleeps; each sleep records whether its
    thread still held a database connection."""
    held: list[bool] = []
    sleep = feed.wakeups.wait

    def recording(seen: int, *, timeout: float) -> None:
        held.append(connection.connection is not None)
        sleep(seen, timeout=timeout)

    monkeypatch.setattr(feed.wakeups, "wait", recording)
    waiter.start()
    wait_until(lambda: bool(held), DEADLINE, "the waiter to sleep")
    return held


@pytest.mark.django_db(transaction=True)
def test_a_commit_wakes_a_waiter_which_sleeps_without_a_postgresql_connection(
    workspace, project, monkeypatch
):
    """On PostgreSQL a sleeping waiter gives its connection (a server's slot) back; on
    SQLite it keeps its open file, which holds no lock: the commit goes through."""
    before = write(workspace)
    waiter = Waiter(workspace, after=before.pk)
    held = waiting(waiter, monkeypatch)
    message = messages.post_message(workspace=workspace, scope="project:core", body="Hi")
    event = Event.objects.get(data__message=message.pk)

    page = waiter.answer()
    assert ids(page) == [event.pk] and page.next == event.pk
    latency = waiter.answered_at - waiter.started_at
    print(f"woken {latency:.3f} s after the wait began")
    assert latency < WOKEN_WITHIN
    kept = connection.vendor == "sqlite"
    assert held and all(one == kept for one in held), (connection.vendor, held)


@pytest.mark.django_db(transaction=True)
def test_a_commit_another_process_made_is_found_without_this_process_waking_it(
    workspace, monkeypatch
):
    """Another app server's commit wakes no waiter here directly: PostgreSQL's NOTIFY
    reaches the listener; SQLite's waiter finds it by polling."""
    monkeypatch.setattr(feed, "committed", notify_only)
    before = write(workspace)
    waiter = Waiter(workspace, after=before.pk)
    waiting(waiter, monkeypatch)
    event = write(workspace)

    page = waiter.answer()
    assert ids(page) == [event.pk]
    latency = waiter.answered_at - waiter.started_at
    print(f"found {latency:.3f} s after the wait began ({connection.vendor})")
    assert latency < WOKEN_WITHIN


# --- the PostgreSQL listener ----------------------------------------------------------


def listener_backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE %s",
            [f"LISTEN {sql.CHANNEL}%"],
        )
        return int(cursor.fetchone()[0])


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_listener_hears_a_commit_of_another_connection(workspace, monkeypatch):
    monkeypatch.setattr(feed, "committed", notify_only)
    wakeups = feed.Wakeups()
    wakeups.ensure_listener()
    try:
        wait_until(lambda: wakeups.listening, DEADLINE, "the listener to LISTEN")
        seen = wakeups.generation()
        writer = threading.Thread(target=lambda: (write(workspace), connections.close_all()))
        writer.start()
        writer.join(DEADLINE)
        wakeups.wait(seen, timeout=DEADLINE)
        assert wakeups.generation() != seen, "no notification reached the listener"
        assert listener_backends() == 1
    finally:
        wakeups.stop()
    assert not wakeups.listening
    wait_until(lambda: listener_backends() == 0, DEADLINE, "the listener's connection to close")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_listener_reconnects_after_losing_its_connection(workspace, monkeypatch):
    monkeypatch.setattr(feed, "committed", notify_only)
    wakeups = feed.Wakeups()
    wakeups.ensure_listener()
    try:
        wait_until(lambda: wakeups.listening, DEADLINE, "the listener to LISTEN")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query LIKE %s",
                [f"LISTEN {sql.CHANNEL}%"],
            )
        wait_until(lambda: listener_backends() == 1 and wakeups.listening, DEADLINE, "LISTEN again")
        seen = wakeups.generation()
        write(workspace)
        wakeups.wait(seen, timeout=DEADLINE)
        assert wakeups.generation() != seen
    finally:
        wakeups.stop()


@pytest.mark.django_db
def test_sqlite_waiters_are_woken_by_another_processs_signal_not_by_polling():
    """SQLite has no NOTIFY: a commit that wrote events appends to a signal file beside
    the database, and each process's watcher wakes its waiters when the file changes."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's behaviour")
    path = feed.signal_path()
    assert path is not None and path.name.endswith("-events")
    wakeups = feed.Wakeups()
    try:
        wakeups.wait(wakeups.generation(), timeout=0.01)  # starts the watcher
        wait_until(lambda: wakeups.listening, DEADLINE, "the watcher")
        assert wakeups.poll_seconds() == feed.LISTENING_POLL_SECONDS
        seen = wakeups.generation()
        woken = threading.Event()

        def waiter() -> None:
            wakeups.wait(seen, timeout=DEADLINE)
            woken.set()

        thread = threading.Thread(target=waiter)
        thread.start()
        # Another app server's commit: a process of its own appends to the file.
        subprocess.run([sys.executable, "-c", f"open({str(path)!r}, 'ab').write(b'.')"], check=True)
        assert woken.wait(DEADLINE) and wakeups.generation() != seen
        thread.join(DEADLINE)
    finally:
        wakeups.stop()
    assert not wakeups.listening


@pytest.mark.django_db
def test_a_commit_that_wrote_events_signals_sqlite_waiters(workspace, monkeypatch):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's behaviour")
    path = feed.signal_path()
    assert path is not None
    before = path.stat().st_size if path.exists() else 0
    feed.committed([workspace.pk])
    assert path.stat().st_size == before + 1
    monkeypatch.setattr(feed, "SIGNAL_FILE_LIMIT", before + 1)  # full: emptied, then one
    feed.committed([workspace.pk])
    assert path.stat().st_size == 1


def test_a_wake_ends_every_wait_on_the_generation_it_saw(monkeypatch):
    wakeups = feed.Wakeups()
    monkeypatch.setattr(wakeups, "ensure_listener", lambda: None)
    seen = wakeups.generation()
    woken: list[int] = []

    def sleeper() -> None:
        wakeups.wait(seen, timeout=DEADLINE)
        woken.append(wakeups.generation())

    threads = [threading.Thread(target=sleeper) for _ in range(3)]
    for thread in threads:
        thread.start()
    wakeups.wake()
    for thread in threads:
        thread.join(DEADLINE)
    assert woken == [seen + 1] * 3
    wakeups.stop()  # no listener: nothing to stop
