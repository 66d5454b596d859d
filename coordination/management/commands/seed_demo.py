"""``seed_demo``: the demo workspace with a month of history, two logins and a key.

Running it again does not seed again: it issues a fresh API key and prints the
same banner.
"""

import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from coordination import demo
from coordination.models import ApiKey, Workspace

BASE_URL = "http://127.0.0.1:8000"
PAGES = (
    "/",
    f"/workspaces/{demo.SLUG}/heatmap/",
    f"/workspaces/{demo.SLUG}/health/",
    "/admin/",
    "/api/v1/docs/",
)


class Command(BaseCommand):
    help = (
        "Create the demo workspace with a month of simulated agent history, an admin "
        "and a manager login and a fresh API key, and print them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--password", default="projektor-demo")
        parser.add_argument("--agents", type=int, default=12, help="fleet size (at least 4)")
        parser.add_argument("--days", type=int, default=30, help="days of history (at least 1)")
        parser.add_argument("--seed", type=int, default=1, help="same seed, same history")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["agents"] < 4 or options["days"] < 1:
            raise CommandError("Give --agents 4 or more and --days 1 or more.")
        started = time.monotonic()
        with transaction.atomic():
            workspace = Workspace.objects.filter(slug=demo.SLUG).first()
            seeded = workspace is None
            if workspace is None:
                workspace = demo.seed(
                    agents=options["agents"], days=options["days"], seed=options["seed"]
                )
            logins = [
                self.login(workspace, "admin", options["password"], operator=True),
                self.login(workspace, "manager", options["password"], operator=False),
            ]
            _, raw = ApiKey.issue(workspace, "demo")
        summary = demo.summarise(workspace)
        took = f"seeded in {time.monotonic() - started:.1f} s" if seeded else "already seeded"
        lines = [
            "",
            f"Projektor demo is ready (workspace {demo.SLUG!r}, {took}).",
            f"  logins      : {logins[0]}",
            f"                {logins[1]}",
            f"  API key     : {raw}",
            f"  try         : curl -H 'Authorization: Bearer {raw}' {BASE_URL}/api/v1/issues/",
            *(
                f"  {'pages       :' if i == 0 else '':<14}{BASE_URL}{page}"
                for i, page in enumerate(PAGES)
            ),
            f"  history     : {summary.line()}",
            "",
        ]
        self.stdout.write("\n".join(lines))

    def login(self, workspace: Workspace, username: str, password: str, *, operator: bool) -> str:
        """Create the user if missing (a member of the demo workspace) and say how
        to log in; an existing user's password is left alone."""
        user, created = get_user_model().objects.get_or_create(
            username=username, defaults={"is_staff": operator, "is_superuser": operator}
        )
        if created:
            user.set_password(password)
            user.save()
        workspace.members.add(user)
        kind = "operator: admin and every page" if operator else "member: the managers' pages"
        return f"{username} / {password if created else '(unchanged)'}  ({kind})"
