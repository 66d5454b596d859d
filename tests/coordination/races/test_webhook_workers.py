"""Webhook workers on PostgreSQL: two at once never send a delivery twice nor out of
order, and a worker killed with SIGKILL mid-delivery loses nothing.

Real concurrency: two workers in threads of their own (each with its pool, each thread
its own connection), and ``manage.py deliver_webhooks`` processes for the kill. Every
wait is on a condition with a deadline."""

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, transaction

from benchmarks.server import app_environment, database_url
from coordination import feed
from coordination.models import Event, EventType, Webhook, WebhookDelivery, Workspace
from coordination.services import events, webhooks
from coordination.webhook_worker import Worker, run_in_thread
from tests.coordination.webhook_receiver import DEADLINE, Receiver, receiving, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
State = WebhookDelivery.State
WEBHOOKS = 6
EVENTS = 30


@pytest.fixture(autouse=True)
def _fast(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.PROJEKTOR_WEBHOOK_ALLOW_PRIVATE = True
    monkeypatch.setattr(webhooks, "FIRST_RETRY_SECONDS", 0.02)
    monkeypatch.setattr(feed.Wakeups, "ensure_listener", lambda self: None)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


def emit(workspace: Workspace, count: int) -> list[int]:
    with events.change():
        for n in range(count):
            events.record(workspace.pk, EventType.MESSAGE_POSTED, data={"n": n})
    return list(Event.objects.order_by("id").values_list("id", flat=True))[-count:]


def delivered(webhook_ids: list[int]) -> int:
    return WebhookDelivery.objects.filter(webhook_id__in=webhook_ids, state=State.DELIVERED).count()


def test_two_workers_never_send_a_delivery_twice_or_out_of_order(workspace, receiver):
    hooks = [
        webhooks.create_webhook(workspace=workspace, url=f"{receiver.url}/{n}")
        for n in range(WEBHOOKS)
    ]
    ids = emit(workspace, EVENTS)
    refused_once: set[tuple[str, int]] = set()
    lock = threading.Lock()

    def answer(request: Any) -> int:
        """Every fifth event is refused the first time it reaches each webhook."""
        key = (request.path, request.event["id"])
        with lock:
            if request.event["id"] % 5 == 0 and key not in refused_once:
                refused_once.add(key)
                return 500
        return 200

    receiver.answer = answer
    workers = [Worker(threads=4, poll=0.02) for _ in range(2)]
    running = [run_in_thread(worker) for worker in workers]
    try:
        wait_until(lambda: delivered([h.pk for h in hooks]) == WEBHOOKS * EVENTS, "every delivery")
    finally:
        for worker in workers:
            worker.stop.set()
        feed.wakeups.wake()
        for thread, done in running:
            thread.join(DEADLINE)
            done.result()

    refusals = sum(1 for event in ids if event % 5 == 0)
    assert len(receiver.requests()) == WEBHOOKS * (EVENTS + refusals)  # not one more
    for webhook in hooks:
        path = "/" + webhook.url.rsplit("/", 1)[1]
        sent = [request.event["id"] for request in receiver.requests(path)]
        assert sorted(set(sent)) == ids and sent == sorted(sent), path  # in event order
        assert Counter(sent) == {e: 2 if e % 5 == 0 else 1 for e in ids}, path
        assert receiver.most_in_flight[path] == 1, path  # one at a time per webhook
    assert sum(worker.sent for worker in workers) == len(receiver.requests())


def start_worker(log: Path) -> subprocess.Popen[bytes]:
    env = app_environment(
        {
            "DATABASE_URL": database_url(connection.settings_dict),
            "PROJEKTOR_WEBHOOK_ALLOW_PRIVATE": "true",
            "PROJEKTOR_SESSION_TTL_SECONDS": str(settings.PROJEKTOR_SESSION_TTL_SECONDS),
        }
    )
    command = [sys.executable, "manage.py", "deliver_webhooks", "--threads", "2", "--poll", "0.1"]
    with log.open("ab") as out:
        return subprocess.Popen(
            command, cwd=settings.BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(DEADLINE)


def locked(delivery_id: int) -> bool:
    """Another transaction holds the delivery's row (the worker sending it)."""
    with transaction.atomic():
        rows = WebhookDelivery.objects.select_for_update(skip_locked=True).filter(pk=delivery_id)
        return not rows.exists()


def test_a_worker_killed_mid_delivery_loses_nothing(workspace, receiver, tmp_path):
    webhook = webhooks.create_webhook(workspace=workspace, url=f"{receiver.url}/hook")
    first, *rest = emit(workspace, 3)
    arrived, let_go = threading.Event(), threading.Event()

    def answer(request: Any) -> int:
        if not arrived.is_set():  # the first request is held until the worker is dead
            arrived.set()
            let_go.wait(DEADLINE)
        return 200

    receiver.answer = answer
    log = tmp_path / "worker.log"
    doomed = start_worker(log)
    try:
        assert arrived.wait(DEADLINE), log.read_text()
        [sending] = WebhookDelivery.objects.filter(webhook=webhook, event_id=first)
        assert locked(sending.pk)  # claimed, and held while it is sent
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(DEADLINE)
    finally:
        let_go.set()
        stop(doomed)

    # Its connection is gone, its transaction rolled back: the delivery is as it was.
    wait_until(lambda: not locked(sending.pk), "the killed worker's lock to go")
    sending.refresh_from_db()
    assert (sending.state, sending.attempts) == (State.PENDING, 0)
    assert not WebhookDelivery.objects.filter(webhook=webhook, state=State.DELIVERED).exists()

    successor = start_worker(log)
    try:
        wait_until(lambda: delivered([webhook.pk]) == 3, "the successor's deliveries")
    finally:
        stop(successor)
    sent = [request.event["id"] for request in receiver.requests()]
    assert sent == [first, first, *rest]  # sent again (at least once), then the rest in order
    assert Webhook.objects.get(pk=webhook.pk).active
