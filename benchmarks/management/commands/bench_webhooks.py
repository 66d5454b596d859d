"""``manage.py bench_webhooks``: the webhook worker's deliveries per second to a local
receiver (``benchmarks.webhooks``)."""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from benchmarks import webhooks
from coordination.management.commands.deliver_webhooks import positive_int
from coordination.webhook_worker import DEFAULT_THREADS


class Command(BaseCommand):
    help = "Deliveries per second from the webhook worker to a local receiver."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--webhooks", type=positive_int, default=8, help="default 8")
        parser.add_argument(
            "--events", type=positive_int, default=500, help="per webhook (default 500)"
        )
        parser.add_argument(
            "--threads",
            type=positive_int,
            default=DEFAULT_THREADS,
            help=f"worker threads (default {DEFAULT_THREADS})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        figures = webhooks.run(
            webhooks_count=options["webhooks"],
            events_count=options["events"],
            threads=options["threads"],
        )
        self.stdout.write(figures.line())
