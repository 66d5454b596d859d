"""The webhook worker (``manage.py deliver_webhooks``): a loop that finds the webhooks
with work and a thread pool that delivers to them (the rules: ``services.webhooks``).

A webhook is worked on by one thread at a time in a process (and, on PostgreSQL, its
head delivery by one process at a time: its row lock); each POST is bounded by a
10-second timeout, so a slow or hanging receiver holds one thread for at most that
long and never the other webhooks. The loop sleeps between passes on the event
log's wake-ups (``feed.wakeups``: on PostgreSQL a commit through any app server wakes
it at once) or for ``poll`` seconds, which is also how due retries are found.

Every ``stall_check`` seconds a pass also announces newly stalled sessions
(``services.progress``, invariant 17 (stalled is derived)).
"""

import json
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
from django.db import DatabaseError, connection
from django.utils import timezone
from rest_framework.utils.encoders import JSONEncoder

from coordination import feed
from coordination.models import Event
from coordination.services import progress, webhooks
from coordination.services.webhooks import Attempt, Target

log = logging.getLogger(__name__)

DEFAULT_THREADS = 8
DEFAULT_POLL_SECONDS = 0.5
# Deliveries in a row to one webhook before its thread goes back to the pool: a busy
# webhook does not starve the others.
BATCH = 50
RENDERED_CACHE = 2000  # events' bodies kept, for the other webhooks they go to


class HttpSender:
    """The event's JSON (the API's own ``EventSerializer``), POSTed with httpx."""

    def __init__(self, timeout: float = webhooks.TIMEOUT_SECONDS) -> None:
        self.timeout = timeout
        self._local = threading.local()
        self._rendered: dict[int, tuple[str, bytes]] = {}
        self._cache_lock = threading.Lock()

    def client(self) -> httpx.Client:
        client = getattr(self._local, "client", None)
        if client is None:
            # No redirects: a 3xx is not a delivery, and could point anywhere.
            client = httpx.Client(timeout=httpx.Timeout(self.timeout), follow_redirects=False)
            self._local.client = client
        return client

    def render(self, event_id: int) -> tuple[str, bytes] | None:
        """The event's type and JSON, rendered once for every webhook it goes to
        (events never change)."""
        with self._cache_lock:
            cached = self._rendered.get(event_id)
        if cached is not None:
            return cached
        event = Event.objects.select_related("project", "agent").filter(pk=event_id).first()
        if event is None:
            return None
        rendered = (event.type, body_of(event))
        with self._cache_lock:
            if len(self._rendered) >= RENDERED_CACHE:
                self._rendered.pop(next(iter(self._rendered)))  # the oldest
            self._rendered[event_id] = rendered
        return rendered

    def post(self, target: Target, headers: dict[str, str], body: bytes) -> Attempt:
        url, pinned_headers, extensions = target.pinned()
        deadline = time.monotonic() + self.timeout
        try:
            with self.client().stream(
                "POST",
                url,
                content=body,
                headers={**headers, **pinned_headers},
                extensions=extensions,
            ) as response:
                status = response.status_code
                if time.monotonic() > deadline:
                    return Attempt(status, f"No answer within {self.timeout:g} s.")
                if 200 <= status < 300:
                    return Attempt(status)
                return Attempt(status, f"HTTP {status}: {excerpt(response)}")
        except httpx.TimeoutException:
            return Attempt(None, f"No answer within {self.timeout:g} s.")
        except httpx.HTTPError as error:
            return Attempt(None, f"{type(error).__name__}: {error}"[: webhooks.MAX_ERROR_CHARS])


def body_of(event: Event) -> bytes:
    """What /events/ shows of the event (the API's own serializer), compact."""
    from coordination.api.serializers.events import EventSerializer

    data = EventSerializer(event).data
    return json.dumps(data, cls=JSONEncoder, separators=(",", ":")).encode()


def excerpt(response: httpx.Response, limit: int = 200) -> str:
    """The start of a refusal's body, for the delivery's ``last_error``."""
    try:
        chunk = next(response.iter_bytes(limit), b"")
    except httpx.HTTPError:
        return ""
    return chunk[:limit].decode("utf-8", "replace").strip()


class Worker:
    """Delivers every due delivery of every active webhook, on ``threads`` threads."""

    def __init__(
        self,
        *,
        threads: int = DEFAULT_THREADS,
        poll: float = DEFAULT_POLL_SECONDS,
        sender: webhooks.Sender | None = None,
        stall_check: float = progress.STALL_CHECK_SECONDS,
    ) -> None:
        self.threads = threads
        self.poll = poll
        self.stall_check = stall_check
        self._next_stall_check = 0.0  # at once, then every stall_check seconds
        self.sender = sender or HttpSender()
        self.stop = threading.Event()
        self._busy: set[int] = set()
        self._lock = threading.Lock()
        self.sent = 0  # attempts made, for the bench and the log

    def run(self, *, once: bool = False) -> None:
        """Until ``stop`` is set; with ``once``, until a pass finds nothing to do."""
        with ThreadPoolExecutor(self.threads, thread_name_prefix="webhook") as pool:
            while not self.stop.is_set():
                seen = feed.wakeups.generation()  # before the scan: a commit after it wakes us
                try:
                    self.announce_stalls()
                    due = webhooks.webhooks_with_work(now=timezone.now())
                except DatabaseError as error:
                    log.warning("webhook worker cannot read the database (%s); retrying", error)
                    connection.close()
                    self.stop.wait(self.poll)
                    continue
                started = [pool.submit(self.work_on, pk) for pk in due if self.take(pk)]
                if once:
                    if sum(future.result() for future in started) == 0:
                        break
                    continue
                feed.wakeups.wait(seen, timeout=min(self.poll, self.stall_check))
        connection.close()

    def announce_stalls(self) -> None:
        """``session.stalled`` for the sessions stalled since the last look, when due."""
        now = time.monotonic()
        if now >= self._next_stall_check:
            self._next_stall_check = now + self.stall_check
            progress.announce_stalls()

    def take(self, webhook_id: int) -> bool:
        with self._lock:
            if webhook_id in self._busy:
                return False
            self._busy.add(webhook_id)
            return True

    def work_on(self, webhook_id: int) -> int:
        """Enqueue the webhook's new events, then send its due deliveries in order;
        returns how much it did (deliveries made and attempts)."""
        done, more = 0, False
        try:
            done += webhooks.enqueue(webhook_id)
            for _ in range(BATCH):
                if self.stop.is_set():
                    break
                attempt = webhooks.deliver_next(webhook_id, sender=self.sender)
                if attempt is None:
                    break
                done += 1
                with self._lock:
                    self.sent += 1
                if not (attempt.delivered or attempt.final):
                    break  # the head waits for its retry; nothing after it may go
            else:
                more = True  # a whole batch: there may be more at once
        except DatabaseError as error:
            log.warning("webhook %s: database error (%s); will retry", webhook_id, error)
        except Exception:
            log.exception("webhook %s: delivery failed unexpectedly", webhook_id)
        finally:
            # A pool thread's connection is not kept between jobs: nothing would close
            # it when the pool ends, and a job (up to a batch) is worth a new one.
            connection.close()
            with self._lock:
                self._busy.discard(webhook_id)
        if more:
            feed.wakeups.wake()  # the loop looks again now, not after its poll
        return done


def run_in_thread(worker: Worker) -> tuple[threading.Thread, Future[None]]:
    """``worker.run()`` in a background thread (tests and the bench)."""
    future: Future[None] = Future()

    def target() -> None:
        try:
            worker.run()
            future.set_result(None)
        except BaseException as error:  # surfaced to whoever waits on the future
            future.set_exception(error)

    thread = threading.Thread(target=target, name="webhook-worker", daemon=True)
    thread.start()
    return thread, future
