"""Races on PostgreSQL: real threads, each with its own database connection.

Two shapes of race, one helper each: ``run_in_threads`` releases many calls at
once (who wins a claim, a cap, a reclaim); ``hold_and_race`` lets one call meet
another's open transaction (a lock held, a write not yet committed) and waits for
it to queue there, rather than for some time to pass.
"""

import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connection, connections, transaction

FENCE_ROUNDS = 20  # rounds of each fence race: both orders happen within them
RACER_TIMEOUT = 30  # seconds a holder waits for its racer to queue behind it


FREE_CONNECTIONS_MARGIN = 4  # for the other test workers' own connections meanwhile
FREE_CONNECTIONS_DEADLINE = 60  # seconds; past it the threads start and say what failed


def wait_for_free_connections(needed: int) -> None:
    """On PostgreSQL, until the server has room for ``needed`` more connections: the
    last race's backends may still be exiting, and other test workers' servers come
    and go. Waits on the count itself, never a guessed time."""
    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + FREE_CONNECTIONS_DEADLINE
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT current_setting('max_connections')::int - count(*)"
                " FROM pg_stat_activity WHERE backend_type = 'client backend'"
            )
            if cursor.fetchone()[0] >= needed + FREE_CONNECTIONS_MARGIN:
                return
            time.sleep(0.05)


def run_in_threads(target: Callable[..., Any], args: list[tuple[Any, ...]]) -> list[Any]:
    """Start one thread per args tuple, release them together, return results in order.

    Each thread uses its own database connection (Django's are per thread) and
    closes it at the end. An exception is returned as the result, not raised.
    """
    wait_for_free_connections(len(args))
    barrier = threading.Barrier(len(args))
    results: list[Any] = [None] * len(args)

    def worker(index: int, call_args: tuple[Any, ...]) -> None:
        try:
            barrier.wait()
            results[index] = target(*call_args)
        except Exception as error:  # noqa: BLE001 - the caller inspects it
            results[index] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i, a)) for i, a in enumerate(args)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def hold_and_race(
    holder: Callable[[Callable[[], None]], Any], racer: Callable[[], Any]
) -> list[Any]:
    """Run ``holder(let_racer_in)`` in a transaction of its own thread, and ``racer()``
    in another thread once the holder calls ``let_racer_in()``. That call returns when
    the racer waits on a lock this transaction holds (or has already finished), so
    whatever the holder does next, the racer is queued behind it; it returns True if
    the racer finished (it did not wait for this transaction), False if it waits.
    Returns what each returned or raised, holder first.
    """
    assert connection.vendor == "postgresql", "pg_blocking_pids is PostgreSQL's"
    started, finished = threading.Event(), threading.Event()
    results: list[Any] = [None, None]

    def let_racer_in() -> bool:
        started.set()
        deadline = time.monotonic() + RACER_TIMEOUT
        with connection.cursor() as cursor:
            while not finished.is_set() and time.monotonic() < deadline:
                cursor.execute(
                    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted"
                    " AND pg_backend_pid() = ANY(pg_blocking_pids(pid)))"
                )
                if cursor.fetchone()[0]:
                    return False
                finished.wait(0.005)
        return finished.is_set()

    def hold() -> None:
        try:
            with transaction.atomic():
                results[0] = holder(let_racer_in)
        except Exception as error:  # noqa: BLE001 - the caller inspects it
            results[0] = error
        finally:
            started.set()  # a holder that failed early still lets the racer run
            connections.close_all()

    def race() -> None:
        started.wait()
        try:
            results[1] = racer()
        except Exception as error:  # noqa: BLE001 - the caller inspects it
            results[1] = error
        finally:
            finished.set()
            connections.close_all()

    threads = [threading.Thread(target=hold), threading.Thread(target=race)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results
