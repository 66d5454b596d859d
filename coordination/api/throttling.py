"""Rate limits (docs/api.md, "Rate limits"): per API key, and without a key per client address.

The design is a fixed-window counter in the ``throttle`` cache, which every app
process shares (Redis with ``REDIS_URL``; else the database, and on the embedded
SQLite a database file of the counters' own).
Each request adds one to the counter of its identity and current window
(``throttle:<scope>:<identity>:<window number>``) and is refused once the count
passes the limit; ``Retry-After`` is the time left in the window.

Why not DRF's ``SimpleRateThrottle``: it keeps a list of every request time of the
last period in one cache value and rewrites it on each request (read, modify,
write). Two processes that read the same list both append and one write is lost,
so the limit does not hold across processes; and at the default 6000/min a busy
key's list is thousands of floats that each request unpickles and pickles again.
Time spent throttling one heartbeat (in-process, ~2,000 heartbeats of one key, the
stock list at most that long; a heartbeat took 1.8 ms on SQLite, 3.0 ms on
PostgreSQL):

    backend              stock SimpleRateThrottle    this counter
    SQLite, DB cache     252 µs (14 %)               56 µs (3 %)
    PostgreSQL, DB cache 1198 µs (40 %)              196 µs (6.5 %)
    Redis                378-421 µs (14-21 %)        123-131 µs (4-7 %)

Each increment is atomic where it happens, so two app processes never both take
the last request of a window:

- Redis: a Lua script does ``INCR``, and ``EXPIRE`` on a window's first request,
  as one atomic command in one round trip (Django's ``cache.incr`` takes two, an
  ``EXISTS`` then an ``INCRBY``, and a key that expires between them is left
  without a TTL).
- Database cache: Django's ``DatabaseCache.incr`` is a ``get`` then a ``set`` (two
  processes can read the same value: a lost update), and only ``add`` is atomic
  (the primary key on ``cache_key``). So the counter is one upsert statement,
  ``INSERT ... ON CONFLICT (cache_key) DO UPDATE SET value = value + 1 RETURNING
  value``, atomic on PostgreSQL (the conflicting row is locked and re-read) and on
  SQLite (one writer at a time). The rows live in a table of their own (the
  ``throttle`` cache, made by ``createcachetable``), holding plain decimal counts
  rather than the pickles that ``DatabaseCache`` reads: nothing calls ``get`` or
  ``set`` on it, so the cache never culls a live counter either. The first request
  of a window deletes the rows of windows that have ended (indexed on
  ``expires``). On PostgreSQL the table is UNLOGGED. The statements live in
  ``coordination.services.rate_limits``.
- SQLite: the same upsert, in a file of its own beside the database
  (``projektor.counters``): SQLite has one write lock per file, and in the
  coordination database's file every request's count queued for the lock that
  heartbeats and claims wait for.
  While Redis is unreachable, requests pass uncounted (and a warning is logged):
  the limits protect the service, they guarantee nothing to the agents.
- Any other backend (a local-memory cache, say): ``add`` then ``incr``; shared
  only as far as that cache is.

The cost of a fixed window: a client can spend its limit at the end of one window
and again at the start of the next, so a burst can reach twice the limit within a
second or two. A sliding window would need the per-request history again.

Authentication runs before the throttles (DRF's order), so a request with an
unknown or revoked key is refused (401) without counting: that costs one
indexed lookup, less than a counter write would, and a 256-bit key cannot be
guessed. Requests without a key are counted per client address wherever they are
let in: the API schema and docs, and the calls of people logged in to the site.
"""

import time
from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from coordination.models import ApiKey
from coordination.services.rate_limits import hit

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """``"6000/min"`` → ``(6000, 60)``: requests, and the window in seconds."""
    count, _, period = rate.partition("/")
    seconds = PERIODS.get(period[:1])
    if not count.isdigit() or seconds is None:
        raise ValueError(f"A rate is '<requests>/<s|min|hour|day>', not {rate!r}.")
    return int(count), seconds


class FixedWindowThrottle(BaseThrottle):
    """Refuse an identity's requests past ``rate`` within one fixed window."""

    scope = ""
    wait_seconds: float | None = None

    def identity(self, request: Request) -> str | None:
        """Whom this request counts for, or ``None`` if this throttle does not apply."""
        raise NotImplementedError

    def allow_request(self, request: Request, view: Any) -> bool:
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        ident = self.identity(request)
        if rate is None or ident is None:
            return True
        limit, period = parse_rate(str(rate))
        now = time.time()
        window = int(now // period)
        if hit(f"{self.scope}:{ident}:{window}", period) <= limit:
            return True
        self.wait_seconds = (window + 1) * period - now
        return False

    def wait(self) -> float | None:
        return self.wait_seconds


class ApiKeyRateThrottle(FixedWindowThrottle):
    """Per API key (``PROJEKTOR_THROTTLE_KEY``)."""

    scope = "key"

    def identity(self, request: Request) -> str | None:
        return str(request.auth.pk) if isinstance(request.auth, ApiKey) else None


class AddressRateThrottle(FixedWindowThrottle):
    """Without a key, per client address (``PROJEKTOR_THROTTLE_ANON``)."""

    scope = "anon"

    def identity(self, request: Request) -> str | None:
        if isinstance(request.auth, ApiKey):
            return None
        return self.get_ident(request) or None
