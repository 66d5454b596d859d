from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from coordination.services import events


class Command(BaseCommand):
    help = (
        "Delete events older than PROJEKTOR_EVENT_RETENTION_DAYS (default 30); a reader "
        "whose cursor lies before them is told it missed events. Run it daily (cron)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=int,
            default=settings.PROJEKTOR_EVENT_RETENTION_DAYS,
            help="keep this many days (default: PROJEKTOR_EVENT_RETENTION_DAYS)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["days"] < 1:
            self.stderr.write("--days must be at least 1")
            raise SystemExit(2)
        pruned = events.prune_events(older_than=timedelta(days=options["days"]))
        for slug, count in pruned.items():
            self.stdout.write(f"{slug}: {count} events pruned")
        if not pruned:
            self.stdout.write("nothing to prune")
