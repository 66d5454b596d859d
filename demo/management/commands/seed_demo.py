"""``seed_demo``: the demo workspace with a month of history, two logins and a key.

Running it again does not seed again: it prints the same banner, with the logins'
password (or how to reset it, once changed), a fresh API key (the previous demo key
is revoked) and an issue free to claim, in a project the live fleet never works. A
history whose newest event is more than a day old is first seeded again to end now
(``demo.anchor``), so the pages' default windows are never empty.
"""

import os
import shlex
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from coordination.models import Workspace
from coordination.services import logs
from demo import access, anchor, seeding, world
from demo.summary import summarise

BASE_URL = "http://127.0.0.1:8000"
PAGES = (
    "/",
    f"/workspaces/{world.SLUG}/heatmap/",
    f"/workspaces/{world.SLUG}/health/",
    "/admin/",
    "/api/v1/docs/",
)


class Command(BaseCommand):
    help = (
        "Create the demo workspace with a month of simulated agent history, an admin "
        "and a manager login and a fresh API key, and print them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--password", default=access.PASSWORD)
        parser.add_argument("--agents", type=int, default=12, help="fleet size (at least 4)")
        parser.add_argument("--days", type=int, default=30, help="days of history (at least 1)")
        parser.add_argument("--seed", type=int, default=1, help="same seed, same history")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["agents"] < 4 or options["days"] < 1:
            raise CommandError("Give --agents 4 or more and --days 1 or more.")
        started = time.monotonic()
        with transaction.atomic():
            workspace = Workspace.objects.filter(slug=world.SLUG).first()
            stale = anchor.staleness(workspace) if workspace is not None else None
            if workspace is not None and stale is not None:
                logs.delete_workspace(workspace)
                workspace = None
            seeded = workspace is None
            if workspace is None:
                workspace = seeding.seed(
                    agents=options["agents"], days=options["days"], seed=options["seed"]
                )
            logins = [
                access.login(workspace, "admin", options["password"], operator=True),
                access.login(workspace, "manager", options["password"], operator=False),
            ]
            raw = access.fresh_key(workspace)
            issue = access.tour_issue(workspace)
        summary = summarise(workspace)
        took = f"seeded in {time.monotonic() - started:.1f} s" if seeded else "already seeded"
        shell = f"export KEY={raw} ISSUE={issue.pk}"
        free = f"{issue.pk} ({issue.project.key}: {issue.title}; the live fleet leaves it to you)"
        lines = [
            "",
            f"Projektor demo is ready (workspace {world.SLUG!r}, {took}).",
            f"  logins      : {login_line(logins[0])}",
            f"                {login_line(logins[1])}",
            f"  API key     : {raw}",
            f"  free issue  : {free}",
            f"  shell       : {shell}  # for the README's examples",
            f"  try         : curl -H 'Authorization: Bearer {raw}' {BASE_URL}/api/v1/issues/",
            *(
                f"  {'pages       :' if i == 0 else '':<14}{BASE_URL}{page}"
                for i, page in enumerate(PAGES)
            ),
            f"  history     : {summary.line()}",
            *([f"  seeded again: the history was {ago(stale)} old"] if stale else []),
            "",
        ]
        self.stdout.write("\n".join(lines))


def ago(delta: timedelta) -> str:
    """``3 d 4 h``, ``5 h 12 min``: how old the history was, to the minute."""
    minutes = int(delta.total_seconds() // 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    return f"{days} d {hours} h" if days else f"{hours} h {minutes} min"


def login_line(login: access.Login) -> str:
    kind = "operator: admin and every page" if login.operator else "member: the managers' pages"
    if login.password is None:
        reset = manage_py("changepassword", login.username)
        return f"{login.username} / (password changed; to set a new one: {reset})  ({kind})"
    return f"{login.username} / {login.password}  ({kind})"


def manage_py(*args: str) -> str:
    """The command line that runs ``manage.py`` as this process was run: with the
    checkout's interpreter, on the same database, and with ``DEBUG=true`` when only
    that let the settings load without a ``SECRET_KEY`` (as under ``make run``)."""
    try:
        interpreter = str(Path(sys.executable).relative_to(Path.cwd()))
    except ValueError:
        interpreter = "python"
    env = {"DATABASE_URL": os.environ.get("DATABASE_URL", "")}
    if settings.DEBUG and not os.environ.get("SECRET_KEY"):
        env["DEBUG"] = "true"
    assignments = [f"{name}={shlex.quote(value)}" for name, value in env.items() if value]
    return " ".join([*assignments, shlex.join([interpreter, "manage.py", *args])])
