"""HTTP against the app under gunicorn, from threads: one exchange's outcome, a load
of client threads, and a bounded wait on a condition."""

import http.client
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.api_helpers import V1

HTTP_TIMEOUT = 20  # seconds, per request


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


def assert_json_answer(outcome: Outcome) -> None:
    """An answer from the app (never a 500, never HTML); a 503 is ``unavailable``
    with a Retry-After in seconds."""
    assert outcome.error is None, outcome.error
    assert outcome.status != 500, outcome.body
    assert outcome.content_type.startswith("application/json"), (outcome.status, outcome.body)
    if outcome.status == 503:
        assert outcome.code == "unavailable" and outcome.body["detail"], outcome.body
        assert outcome.retry_after is not None and outcome.retry_after.isdigit()
