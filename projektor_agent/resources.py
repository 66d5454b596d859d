"""Resources: counted holds on what is not a file (docs/agents.md, "Holding a
resource"). The calls that ``projektor hold`` and ``projektor run --hold`` make alike:
acquire (waiting as long as asked, the server's wait at most a minute a call), release,
and the environment that hands a hold's slots to a command."""

from __future__ import annotations

import math
import re
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

from projektor_agent.client import Client
from projektor_agent.errors import CommandError, Refused, UsageError
from projektor_agent.output import say

NAME = re.compile(r"^[a-z0-9][a-z0-9._:-]{0,63}$")
SERVER_WAIT_LIMIT = 60  # seconds: the longest wait of one acquire call
SLOTS = "PROJEKTOR_SLOTS"
SLOT = "PROJEKTOR_SLOT"
BUSY = "resource_busy"
GONE = ("hold_not_held", "stale_fence")  # at the release: nothing of this session's to let go


@dataclass(frozen=True)
class Wanted:
    """A resource to hold and how many of its units."""

    name: str
    units: int = 1

    @classmethod
    def parsed(cls, spec: str) -> Wanted:
        """``NAME[:UNITS]``: a trailing ``:N`` of digits is the units (so ``db:test`` is
        one unit of ``db:test``, and ``gpu:0:1`` one unit of ``gpu:0``)."""
        name, units = spec, 1
        head, _, tail = spec.rpartition(":")
        if head and tail.isascii() and tail.isdigit():
            name, units = head, int(tail)
        if units < 1:
            raise UsageError(f"--hold {spec}: give at least one unit (NAME or NAME:UNITS)")
        return cls(checked_name(name), units)


def checked_name(name: str) -> str:
    if not NAME.match(name):
        raise UsageError(
            f"{name!r} is not a resource name: lower-case letters, digits and . _ : - "
            "(64 at most, starting with a letter or digit), like db:test or ports"
        )
    return name


def wanted(specs: list[str] | None) -> tuple[Wanted, ...]:
    """``--hold`` specs, in name order (every runner takes them in that order, so two
    runners never wait on each other crosswise); a name given twice is a usage error."""
    holds = sorted((Wanted.parsed(spec) for spec in specs or []), key=lambda w: w.name)
    names = [hold.name for hold in holds]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(f"--hold names {', '.join(twice)} twice: give each resource once")
    return tuple(holds)


@dataclass(frozen=True)
class Held:
    """A hold of a session. ``ours``: acquired by this call (201), so released by it;
    a hold the session had already (200) is left to whoever took it."""

    name: str
    hold: dict[str, Any]
    ours: bool

    @property
    def slots(self) -> list[int]:
        return [int(slot) for slot in self.hold.get("slots") or []]

    @property
    def fence(self) -> int | None:
        fence = self.hold.get("fence")
        return None if fence is None else int(fence)

    def describe(self) -> str:
        slots = ",".join(str(slot) for slot in self.slots) or "none"
        units = int(self.hold.get("units") or len(self.slots))
        return f"{self.name}: {units} unit{'' if units == 1 else 's'}, slots {slots}"


def path(name: str, action: str = "") -> str:
    return f"/resources/{urllib.parse.quote(name, safe=':')}/" + (f"{action}/" if action else "")


def variable(name: str) -> str:
    """``PROJEKTOR_SLOTS_<NAME>``: upper-cased, every other character than a letter or a
    digit as ``_`` (``db:test`` → ``PROJEKTOR_SLOTS_DB_TEST``)."""
    return f"{SLOTS}_" + re.sub(r"[^A-Z0-9]", "_", name.upper())


def environment(holds: list[Held]) -> dict[str, str]:
    """What a command holding ``holds`` is told: each hold's slots, comma-separated, as
    ``PROJEKTOR_SLOTS_<NAME>``; with one hold, also ``PROJEKTOR_SLOTS`` and its first
    slot as ``PROJEKTOR_SLOT``."""
    env = {variable(held.name): ",".join(str(s) for s in held.slots) for held in holds}
    if len(holds) == 1:
        env[SLOTS] = env[variable(holds[0].name)]
        env[SLOT] = str(holds[0].slots[0]) if holds[0].slots else ""
    return env


def acquire(client: Client, want: Wanted, *, session: int, issue: int | None, wait: float) -> Held:
    """``want`` held in ``session``, waiting up to ``wait`` seconds for its units (in
    calls of a minute at most: the server serves its waiters first come, first served).
    A resource still busy at the end is Refused (``resource_busy``), naming its holders."""
    deadline = time.monotonic() + max(wait, 0.0)
    body: dict[str, Any] = {"session": session, "units": want.units}
    if issue is not None:
        body["issue"] = issue
    while True:
        left = deadline - time.monotonic()
        body["wait"] = min(SERVER_WAIT_LIMIT, max(0, math.ceil(left)))
        try:
            status, hold = client.answer(
                "POST", path(want.name, "acquire"), body, timeout=body["wait"] + 20.0
            )
        except Refused as refused:
            if refused.code != BUSY or deadline - time.monotonic() < 1:
                raise
            say(f"{want.name} is still busy ({refused.message}); waiting on")
            continue
        return Held(name=want.name, hold=dict(hold), ours=status == 201)


def release(client: Client, held: Held, session: int, timeout: float = 20.0) -> bool:
    """``held`` let go (``released``); False when the session held it no more (taken
    back or ended meanwhile): then there is nothing to let go."""
    body: dict[str, Any] = {"session": session}
    if held.fence is not None:
        body["fence"] = held.fence
    try:
        client.post(path(held.name, "release"), body, idempotent=True, timeout=timeout)
    except Refused as refused:
        if refused.code in GONE:
            return False
        raise
    return True


def check(client: Client, holds: tuple[Wanted, ...]) -> None:
    """Each resource of ``holds`` exists and has the units asked for: a usage error
    otherwise, before anything is taken."""
    for want in holds:
        try:
            resource = client.get(path(want.name))
        except CommandError as error:
            if error.http_status != 404:
                raise
            raise UsageError(
                f"no resource {want.name!r} in this workspace: create it (POST "
                "/api/v1/resources/) or check the name (nothing taken)",
                body=error.body,
                http_status=404,
            ) from None
        capacity = int(resource.get("capacity") or 0)
        if want.units > capacity:
            raise UsageError(
                f"--hold {want.name}:{want.units}: the resource has {capacity} "
                f"unit{'' if capacity == 1 else 's'} (nothing taken)"
            )
