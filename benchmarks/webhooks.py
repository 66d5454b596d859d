"""``manage.py bench_webhooks``: deliveries per second from the webhook worker to a
local receiver (an ``http.server`` that answers 204 at once, keeping connections
alive as a real receiver would), on the configured database.

A throw-away workspace gets ``webhooks`` webhooks and ``events`` events; the clock
runs from the worker's start until every delivery is delivered, so it includes the
lazy enqueueing from the log, the signing, the POST and the write of each outcome."""

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from django.db import connection
from django.test.utils import override_settings

from coordination.models import EventType, Webhook, WebhookDelivery, Workspace
from coordination.services import events, logs, webhooks
from coordination.webhook_worker import Worker

EVENTS_PER_CHANGE = 100


class QuietReceiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per worker thread

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def receiver() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), QuietReceiver)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class Figures:
    database: str
    webhooks: int
    events: int
    threads: int
    deliveries: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.deliveries / self.seconds

    def line(self) -> str:
        return (
            f"webhooks on {self.database}: {self.deliveries} deliveries to {self.webhooks} "
            f"webhooks in {self.seconds:.2f} s = {self.per_second:.0f} deliveries/s "
            f"({self.threads} worker threads, a local receiver)"
        )


def run(*, webhooks_count: int, events_count: int, threads: int) -> Figures:
    workspace = Workspace.objects.create(
        slug=f"bench-webhooks-{uuid.uuid4().hex[:8]}", name="Webhook bench"
    )
    try:
        with receiver() as url, override_settings(PROJEKTOR_WEBHOOK_ALLOW_PRIVATE=True):
            hooks = [
                webhooks.create_webhook(workspace=workspace, url=f"{url}/{n}")
                for n in range(webhooks_count)
            ]
            for start in range(0, events_count, EVENTS_PER_CHANGE):
                with events.change():
                    for n in range(start, min(start + EVENTS_PER_CHANGE, events_count)):
                        events.record(workspace.pk, EventType.MESSAGE_POSTED, data={"n": n})
            worker = Worker(threads=threads)
            started = time.monotonic()
            worker.run(once=True)
            seconds = time.monotonic() - started
        delivered = WebhookDelivery.objects.filter(
            webhook__in=hooks, state=WebhookDelivery.State.DELIVERED
        ).count()
        expected = webhooks_count * events_count
        if delivered != expected:
            raise RuntimeError(f"{delivered} of {expected} deliveries were delivered")
        return Figures(connection.vendor, webhooks_count, events_count, threads, delivered, seconds)
    finally:
        Webhook.objects.filter(workspace=workspace).delete()
        logs.delete_workspace(workspace)
