"""``manage.py demo_fleet``: a live fleet of agents working the demo workspace over HTTP.

It mints an API key of its own (``demo-fleet``; the previous run's is revoked, and
this one when it stops) and a reviewer's login, waits until the server answers
``/healthz``, then runs the fleet (``demo.fleet``) until stopped
(Ctrl-C, SIGTERM) or for ``--seconds``. Run it on the server's database (the same
``DATABASE_URL``): that is where the key and the login must be. It exits non-zero if
the server ever answered 5xx.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections, transaction

from coordination.models import Workspace
from demo import access, world
from demo.fleet import Fleet, FleetConfig, wait_for_server

DEFAULT_URL = "http://127.0.0.1:8000"


def positive(kind: type) -> Any:
    def parse(value: str) -> Any:
        number = kind(value)
        if number <= 0:
            raise ValueError(value)
        return number

    parse.__name__ = kind.__name__  # argparse names the type in its error
    return parse


def chance(value: str) -> float:
    number = float(value)
    if not 0 <= number <= 1:
        raise ValueError(value)
    return number


class Command(BaseCommand):
    help = (
        "Drive the demo workspace through the REST API with a live fleet of agents "
        "(heartbeats, leases, colliding file claims, runs, crashes) and a reviewer, "
        "until stopped. Run seed_demo first, and the server beside it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--url", default=DEFAULT_URL, help=f"the server (default {DEFAULT_URL})"
        )
        parser.add_argument(
            "--agents", type=positive(int), default=5, help="agents at work at once (default 5)"
        )
        parser.add_argument(
            "--interval",
            type=positive(float),
            default=2.0,
            help="seconds between one agent's actions, jittered (default 2)",
        )
        parser.add_argument(
            "--seconds", type=positive(float), default=None, help="stop after this long"
        )
        parser.add_argument(
            "--crash-chance",
            type=chance,
            default=0.2,
            help="share of sessions that crash instead of signing off (default 0.2)",
        )
        parser.add_argument(
            "--stall-chance",
            type=chance,
            default=0.1,
            help="share of sessions that get stuck for a while, heartbeating without "
            "progress: stalled once PROJEKTOR_STALL_AFTER_SECONDS passes (default 0.1)",
        )
        parser.add_argument(
            "--wait",
            type=positive(float),
            default=60.0,
            help="seconds to wait for the server to answer /healthz (default 60)",
        )
        parser.add_argument("--seed", type=int, default=None, help="seed the fleet's choices")

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.filter(slug=world.SLUG).first()
        if workspace is None:
            raise CommandError("There is no demo workspace: run `manage.py seed_demo` first.")
        with transaction.atomic():
            key = access.fresh_key(workspace, access.FLEET_KEY_NAME)
            reviewer, password = access.reviewer_login(workspace)
        connections.close_all()  # the fleet speaks HTTP only; no connection held meanwhile
        verbosity = options["verbosity"]
        lock = threading.Lock()

        def say(text: str, level: int) -> None:
            if level <= verbosity:
                with lock:
                    self.stdout.write(f"{time.strftime('%H:%M:%S')} {text}")
                    self.stdout.flush()

        fleet = Fleet(
            FleetConfig(
                url=options["url"],
                key=key,
                reviewer=reviewer,
                reviewer_password=password,
                agents=options["agents"],
                interval=options["interval"],
                ttl=float(settings.PROJEKTOR_SESSION_TTL_SECONDS),
                crash_chance=options["crash_chance"],
                stall_chance=options["stall_chance"],
                stall_after=float(settings.PROJEKTOR_STALL_AFTER_SECONDS),
                seed=options["seed"],
            ),
            say=say,
        )
        previous = self.on_signals(fleet.stop)
        try:
            if not wait_for_server(options["url"], fleet.stop, options["wait"]):
                if fleet.stop.is_set():
                    return
                raise CommandError(f"No answer from {options['url']}/healthz: is the server up?")
            say(
                f"demo fleet: {options['agents']} agents and a reviewer at work on "
                f"{options['url']} (session TTL {settings.PROJEKTOR_SESSION_TTL_SECONDS} s)",
                1,
            )
            fleet.run(options["seconds"])
        finally:
            self.restore(previous)
            access.revoke(workspace, access.FLEET_KEY_NAME)
        say(fleet.summary(), 1)
        server_errors = fleet.tally.server_errors()
        if server_errors:
            shown = ", ".join(
                f"{call} {status} ×{n}" for (call, status), n in server_errors.items()
            )
            raise CommandError(f"The server answered 5xx: {shown}")

    def on_signals(self, stop: threading.Event) -> dict[int, Any]:
        """SIGTERM (``make run`` stopping) and Ctrl-C stop the fleet cleanly."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, Any] = {}
        for number in (signal.SIGTERM, signal.SIGINT):
            previous[number] = signal.signal(number, lambda *_: stop.set())
        return previous

    def restore(self, previous: dict[int, Any]) -> None:
        for number, handler in previous.items():
            signal.signal(number, handler)
