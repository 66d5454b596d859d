"""A real HTTP receiver for the webhook tests: ``http.server`` on 127.0.0.1 in a thread,
recording every request; what it answers is the test's choice (``answer``), and it
can hold requests until the test lets them go (``hold``)."""

import hashlib
import hmac
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEADLINE = 60.0  # seconds any condition of these tests may take on a loaded machine


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.body)
        return data

    @property
    def delivery(self) -> int:
        return int(self.headers["x-projektor-delivery"])

    def signed_with(self, secret: str) -> bool:
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, self.headers["x-projektor-signature"])


class Receiver:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.lock = threading.Lock()
        # Called with each request (in its thread), returns the status to answer.
        self.answer: Callable[[Received], int] = lambda request: 200
        self.in_flight: Counter[str] = Counter()  # per path: requests being answered now
        self.most_in_flight: dict[str, int] = {}  # per path: concurrent requests seen
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", 0))
                request = Received(
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length),
                )
                with receiver.lock:
                    receiver.received.append(request)
                    receiver.in_flight[self.path] += 1
                    now = receiver.most_in_flight.get(self.path, 0)
                    receiver.most_in_flight[self.path] = max(now, receiver.in_flight[self.path])
                try:
                    status = receiver.answer(request)
                finally:
                    with receiver.lock:
                        receiver.in_flight[self.path] -= 1
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the worker hung up (a timeout, a kill)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def requests(self, path: str | None = None) -> list[Received]:
        with self.lock:
            return [r for r in self.received if path is None or r.path == path]


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver()
    receiver.thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def wait_until(condition: Callable[[], Any], what: str, deadline: float = DEADLINE) -> Any:
    """Poll ``condition`` until it is truthy (returned) or the deadline passes (fail)."""
    end = time.monotonic() + deadline
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)
