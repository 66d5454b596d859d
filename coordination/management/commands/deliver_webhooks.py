"""``manage.py deliver_webhooks``: the long-running webhook worker
(``coordination.webhook_worker``). Any number may run on PostgreSQL; on SQLite run one."""

import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from coordination import feed
from coordination.webhook_worker import DEFAULT_POLL_SECONDS, DEFAULT_THREADS, Worker


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


class Command(BaseCommand):
    help = "Deliver the webhooks' events (runs until stopped; --once: what is due now)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--threads",
            type=positive_int,
            default=DEFAULT_THREADS,
            help=f"deliveries in flight at once, to different webhooks (default {DEFAULT_THREADS})",
        )
        parser.add_argument(
            "--once",
            action="store_true",
            help="deliver what is due now (no retry waits), then exit",
        )
        parser.add_argument(
            "--poll",
            type=float,
            default=DEFAULT_POLL_SECONDS,
            help=f"seconds between looks for due retries (default {DEFAULT_POLL_SECONDS:g})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        worker = Worker(threads=options["threads"], poll=options["poll"])

        def stop(signum: int, frame: Any) -> None:
            worker.stop.set()  # in-flight deliveries finish (each within its timeout)
            feed.wakeups.wake()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        if options["verbosity"] >= 1 and not options["once"]:
            self.stderr.write(f"Delivering webhooks with {options['threads']} threads.")
        worker.run(once=options["once"])
        if options["verbosity"] >= 1:
            self.stderr.write(f"Stopped after {worker.sent} delivery attempts.")
