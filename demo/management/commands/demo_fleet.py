"""``manage.py demo_fleet``: real runners and a reviewer working the demo workspace.

It mints an API key of its own (``demo-fleet``; the previous run's is revoked, and
this one when it stops) and a reviewer's login, makes the demo repository beside the
database on the first run (``demo.fleet.place``), gives every open issue of the demo a
plan entry for the scripted agent (``demo.fleet.plan``), waits until the server answers
``/healthz``, then runs the fleet (``demo.fleet``: ``--agents`` runners and the
reviewer) until stopped (Ctrl-C, SIGTERM: the runners get SIGTERM, give their work
back and exit; whatever is left is killed) or for ``--seconds``. Run it on the
server's database (the same ``DATABASE_URL``): that is where the key and the login
must be. It exits non-zero if the server ever answered the reviewer 5xx.
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
from demo.fleet.place import demo_place, ensure_repository
from demo.fleet.plan import DemoPlan, Pacing, prepare

DEFAULT_URL = "http://127.0.0.1:8000"


def positive(kind: type) -> Any:
    def parse(value: str) -> Any:
        number = kind(value)
        if number <= 0:
            raise ValueError(value)
        return number

    parse.__name__ = kind.__name__  # argparse names the type in its error
    return parse


def seconds_range(value: str) -> tuple[float, float]:
    low, _, high = value.partition(",")
    pair = (float(low), float(high or low))
    if not 0 < pair[0] <= pair[1]:
        raise ValueError(value)
    return pair


def chance(value: str) -> float:
    number = float(value)
    if not 0 <= number <= 1:
        raise ValueError(value)
    return number


class Command(BaseCommand):
    help = (
        "Work the demo workspace with real runners (projektor run --loop with the scripted "
        "agent on the demo repository beside the database) and a reviewer, until stopped. "
        "Run seed_demo first, and the server beside it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--url", default=DEFAULT_URL, help=f"the server (default {DEFAULT_URL})"
        )
        parser.add_argument(
            "--agents", type=positive(int), default=4, help="runners at work at once (default 4)"
        )
        parser.add_argument(
            "--work",
            type=seconds_range,
            default=Pacing.seconds,
            metavar="MIN,MAX",
            help="seconds the scripted agent works an issue (default %(default)s)",
        )
        parser.add_argument(
            "--crash-chance",
            type=chance,
            default=Pacing.crash_chance,
            help="share of issues whose first attempt crashes (default %(default)s)",
        )
        parser.add_argument(
            "--stall-chance",
            type=chance,
            default=Pacing.idle_chance,
            help="share of issues the agent sits on idle, its runner heartbeating, past "
            "PROJEKTOR_STALL_AFTER_SECONDS: shown stalled meanwhile (default %(default)s)",
        )
        parser.add_argument(
            "--review-every",
            type=positive(float),
            default=5.0,
            help="seconds between the reviewer's turns, jittered (default 5)",
        )
        parser.add_argument(
            "--seconds", type=positive(float), default=None, help="stop after this long"
        )
        parser.add_argument(
            "--wait",
            type=positive(float),
            default=60.0,
            help="seconds to wait for the server to answer /healthz (default 60)",
        )
        parser.add_argument("--seed", type=int, default=None, help="seed the reviewer's choices")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["agents"] > len(world.AGENT_NAMES):
            raise CommandError(f"Give --agents {len(world.AGENT_NAMES)} or fewer.")
        workspace = Workspace.objects.filter(slug=world.SLUG).first()
        if workspace is None:
            raise CommandError("There is no demo workspace: run `manage.py seed_demo` first.")
        place = demo_place()
        pacing = Pacing(
            seconds=options["work"],
            crash_chance=options["crash_chance"],
            idle_chance=options["stall_chance"],
            stall_after=float(settings.PROJEKTOR_STALL_AFTER_SECONDS),
        )
        plan = DemoPlan(place.plan, pacing, ttl=float(settings.PROJEKTOR_SESSION_TTL_SECONDS))
        with transaction.atomic():
            planned = prepare(workspace, plan)
            key = access.fresh_key(workspace, access.FLEET_KEY_NAME)
            reviewer, password = access.reviewer_login(workspace)
        connections.close_all()  # the fleet speaks HTTP only; no connection held meanwhile
        created = ensure_repository(place, plan.files())
        plan.save()
        verbosity = options["verbosity"]
        lock = threading.Lock()

        def say(text: str, level: int) -> None:
            if level <= verbosity:
                with lock:
                    self.stdout.write(f"{time.strftime('%H:%M:%S')} {text}")
                    self.stdout.flush()

        say(
            f"demo repository {'made' if created else 'kept'} at {place.repo} "
            f"({planned} open issues planned; runners' logs in {place.logs})",
            1,
        )
        fleet = Fleet(
            FleetConfig(
                url=options["url"],
                key=key,
                reviewer=reviewer,
                reviewer_password=password,
                place=place,
                agents=options["agents"],
                pacing=pacing,
                ttl=float(settings.PROJEKTOR_SESSION_TTL_SECONDS),
                review_every=options["review_every"],
                seed=options["seed"],
            ),
            plan,
            say=say,
        )
        previous = self.on_signals(fleet.stop)
        try:
            if not wait_for_server(options["url"], fleet.stop, options["wait"]):
                if fleet.stop.is_set():
                    return
                raise CommandError(f"No answer from {options['url']}/healthz: is the server up?")
            say(
                f"demo fleet: {options['agents']} runners and a reviewer at work on "
                f"{options['url']} (session TTL {settings.PROJEKTOR_SESSION_TTL_SECONDS} s, "
                f"stalled after {settings.PROJEKTOR_STALL_AFTER_SECONDS} s)",
                1,
            )
            fleet.run(options["seconds"])
        finally:
            self.restore(previous)
            access.revoke_minted(workspace, key)
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
