"""The rate-limit counters: one atomic increment per request, shared by every app
process (the throttle classes in ``coordination.api.throttling`` say why and how;
this module holds the statements their atomicity rests on)."""

import functools
import logging
import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.cache import BaseCache, caches
from django.core.cache.backends.db import BaseDatabaseCache
from django.core.cache.backends.redis import RedisCache
from django.db import connections, router

from coordination.db import rows, sql

logger = logging.getLogger(__name__)

CACHE_ALIAS = "throttle"


def hit(key: str, period: int) -> int:
    """Add one to the counter ``key`` (kept at least ``period`` s) and return its count."""
    cache = caches[CACHE_ALIAS]
    ttl = 2 * period  # a window's key is used for one period; the rest is slack
    if isinstance(cache, RedisCache):
        return _hit_redis(cache, key, ttl)
    counted = getattr(cache, "hit", None)  # a backend that counts atomically itself:
    if counted is not None:  # SQLite's file of its own (projektor.counters)
        return int(counted(key, ttl))
    if isinstance(cache, BaseDatabaseCache):
        return _hit_database(cache, key, ttl)
    if cache.add(key, 1, ttl):
        return 1
    try:
        return cache.incr(key)
    except ValueError:  # expired between the two calls: this is the window's first
        cache.set(key, 1, ttl)
        return 1


# INCR and, on a window's first request, EXPIRE: one atomic command, one round trip.
INCR_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count
"""


@functools.cache
def _redis_script(client: Any) -> Any:
    """The counter script, on the cache's connection pool (one per process and cache)."""
    return client.get_client(write=True).register_script(INCR_SCRIPT)


def _hit_redis(cache: RedisCache, key: str, ttl: int) -> int:
    """The count, or 0 while Redis is unreachable: the API stays up unlimited (the
    limits protect the service; they are no coordination guarantee)."""
    import redis

    try:
        return int(_redis_script(cache._cache)(keys=[cache.make_key(key)], args=[ttl]))
    except redis.RedisError as error:
        logger.warning("Rate limits not applied: Redis is unavailable (%s)", error)
        return 0


def _table_name() -> str:
    return str(settings.CACHES[CACHE_ALIAS]["LOCATION"])


def _hit_database(cache: BaseDatabaseCache, key: str, ttl: int) -> int:
    db = router.db_for_write(cache.cache_model_class)
    connection = connections[db]
    table = connection.ops.quote_name(_table_name())
    now = time.time()
    expires = connection.ops.adapt_datetimefield_value(
        datetime.fromtimestamp(int(now) + ttl, tz=UTC)
    )
    # The one statement the counter's atomicity rests on (see the module docstring).
    with rows.cursor(db) as cursor:
        cursor.execute(*sql.count_hit(quoted_table=table, key=cache.make_key(key), expires=expires))
        count = int(cursor.fetchone()[0])
        if count == 1:  # a new window: forget the ended ones
            now_value = connection.ops.adapt_datetimefield_value(
                datetime.fromtimestamp(now, tz=UTC)
            )
            cursor.execute(*sql.forget_ended_windows(quoted_table=table, now=now_value))
    return count


def prepare_counter_table(using: str) -> None:
    """On PostgreSQL, make the counters' table UNLOGGED: an increment then writes no
    WAL and its commit waits for no flush (a third to a sixth of the time), and the
    counts are as disposable as they are in Redis (a crash or a failover to a
    replica empties the table: at most one window's requests are counted again)."""
    cache = caches[CACHE_ALIAS]
    if (
        not isinstance(cache, BaseDatabaseCache)
        or router.db_for_write(cache.cache_model_class) != using
    ):
        return
    connection = connections[using]
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(*sql.table_persistence(table=_table_name()))
        row = cursor.fetchone()
        if row and row[0] == "p":
            cursor.execute(*sql.set_unlogged(quoted_table=connection.ops.quote_name(_table_name())))


def clear() -> None:
    """Forget every counter. On Redis only the counters' keys go, not the database."""
    cache: BaseCache = caches[CACHE_ALIAS]
    if isinstance(cache, RedisCache):
        client = cache._cache.get_client(write=True)
        keys = list(client.scan_iter(match=cache.make_key("*"), count=1000))
        if keys:
            client.delete(*keys)
    else:
        cache.clear()
