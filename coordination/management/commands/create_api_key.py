import argparse
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from coordination.errors import CoordinationError
from coordination.models import ApiKey, Workspace
from coordination.services import keys

DURATION = re.compile(r"([1-9][0-9]*)([mhd])")
UNITS = {"m": "minutes", "h": "hours", "d": "days"}


def expiry(text: str) -> datetime:
    """``30m``, ``12h``, ``7d`` from now, or an ISO 8601 time (UTC unless it says)."""
    if match := DURATION.fullmatch(text):
        return timezone.now() + timedelta(**{UNITS[match[2]]: int(match[1])})
    moment = parse_datetime(text)
    if moment is None:
        raise argparse.ArgumentTypeError(f"{text!r} is neither 30m/12h/7d nor an ISO 8601 time")
    return moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = (
        "Create an API key for a workspace (created if missing); prints only the key. "
        "A fleet key (the default) acts for any agent, an agent key only as --agent, a "
        "read key only reads (docs/api.md, Auth)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workspace", help="workspace slug")
        parser.add_argument("--name", default="", help="a label for the key")
        parser.add_argument("--kind", choices=ApiKey.Kind.values, default=ApiKey.Kind.FLEET)
        parser.add_argument("--agent", help="the agent an agent key acts as (created if new)")
        parser.add_argument(
            "--can-force",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="may force file claims (default: yes for fleet keys, no for the others)",
        )
        parser.add_argument(
            "--expires", type=expiry, help="30m, 12h, 7d from now, or an ISO 8601 time"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["workspace"]
        workspace, _ = Workspace.objects.get_or_create(slug=slug, defaults={"name": slug})
        try:
            _, raw = keys.mint_key(
                workspace=workspace,
                name=options["name"],
                kind=options["kind"],
                agent_name=options["agent"],
                can_force=options["can_force"],
                expires_at=options["expires"],
            )
        except CoordinationError as error:
            raise CommandError(error.detail) from None
        self.stdout.write(raw)
