"""The rate-limit counters on SQLite, in a file of their own (``projektor.counters``):
counting never takes the coordination database's write lock."""

import multiprocessing
import sqlite3
import threading
from typing import Any

import pytest
from django.core.cache import caches
from django.db import connection

from coordination.services import rate_limits
from projektor.counters import SQLiteCounterCache, counters_path

pytestmark = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="the counters' own file is SQLite's"
)


def counters() -> SQLiteCounterCache:
    cache = caches[rate_limits.CACHE_ALIAS]
    assert isinstance(cache, SQLiteCounterCache)
    return cache


@pytest.mark.django_db
def test_the_counters_live_beside_the_database_in_a_file_of_their_own():
    database = str(connection.settings_dict["NAME"])
    assert counters().path() == counters_path(database) == f"{database}-throttle"
    assert rate_limits.hit("key:1:7", 60) == 1
    with sqlite3.connect(f"{database}-throttle") as own:
        assert own.execute("SELECT count FROM counters").fetchall() == [(1,)]
    with connection.cursor() as cursor:  # nothing of theirs in the database
        tables = connection.introspection.table_names(cursor)
    assert "counters" not in tables and "projektor_throttle" not in tables


@pytest.mark.django_db(transaction=True)
def test_counting_while_another_process_holds_the_database_write_lock():
    """Another writer holds the coordination database's write lock (a heartbeat, a
    claim): the counter counts without waiting for it. Counted in the database, it
    would wait out the busy timeout and fail with "database is locked"."""
    writer = sqlite3.connect(str(connection.settings_dict["NAME"]), isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # the write lock, until ROLLBACK
        counts = [rate_limits.hit("key:1:8", 60) for _ in range(3)]
        # And from another thread, which has its own connection to the counters.
        seen: list[int] = []
        thread = threading.Thread(target=lambda: seen.append(rate_limits.hit("key:1:8", 60)))
        thread.start()
        thread.join()
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert counts == [1, 2, 3] and seen == [4]


@pytest.mark.django_db
def test_a_windows_first_count_forgets_the_windows_that_ended(monkeypatch):
    cache = counters()
    clock = [1_000_000.0]
    monkeypatch.setattr("projektor.counters.time.time", lambda: clock[0])
    assert [cache.hit("a", 60) for _ in range(2)] == [1, 2]
    clock[0] += 61  # window "a" has ended
    assert cache.hit("b", 60) == 1
    assert cache.get("a") is None and cache.get("b") == 1
    rows = cache.connection().execute("SELECT key FROM counters").fetchall()
    assert rows == [(cache.make_key("b"),)]


@pytest.mark.django_db
def test_the_cache_api_on_integers():
    cache = counters()
    assert cache.get("n", "absent") == "absent"
    assert cache.add("n", 5) is True and cache.add("n", 9) is False
    assert cache.incr("n") == 6 and cache.incr("n", 4) == 10
    cache.set("n", 2)
    assert cache.get("n") == 2
    assert cache.touch("n", 0) is True  # expires at once
    assert cache.get("n") is None and cache.add("n", 1) is True
    assert cache.delete("n") is True and cache.get("n") is None
    with pytest.raises(ValueError):
        cache.incr("n")
    with pytest.raises(TypeError):
        cache.set("n", "text")
    cache.set("m", 1, timeout=None)
    cache.clear()
    assert cache.get("m") is None


def count_once(path: str, start: Any, failures: Any) -> None:
    """One server's first count in a new counters file (a process of its own)."""
    cache = SQLiteCounterCache(path, {})
    start.wait()
    try:
        cache.hit("key:1:7", 60)
    except sqlite3.Error as error:
        failures.put(str(error))


def test_many_processes_opening_a_new_counters_file_at_once_all_count(tmp_path):
    """Switching a new file to WAL takes it exclusively, without SQLite's busy wait:
    servers opening it at that moment were told "database is locked" (a 500, under
    load). Each opener asks again until the switch is done; every count is kept."""
    context = multiprocessing.get_context("fork")
    openers, files = 6, 15
    failures = context.Queue()
    for n in range(files):
        path = str(tmp_path / f"counters-{n}")
        start = context.Barrier(openers)
        processes = [
            context.Process(target=count_once, args=(path, start, failures)) for _ in range(openers)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=60)
            assert process.exitcode == 0
        with sqlite3.connect(path) as own:
            assert own.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            counted = own.execute("SELECT count FROM counters").fetchall()
        assert failures.empty() and counted == [(openers,)], (counted, failures.get())
