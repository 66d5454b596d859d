"""Rate limits (docs/api.md): per API key, else per client address; shared by all app processes."""

import http.client
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.core.cache.backends.db import BaseDatabaseCache
from django.db import connection
from rest_framework.test import APIClient

from benchmarks import server as harness
from coordination.api import throttling
from coordination.models import ApiKey
from coordination.services import rate_limits
from tests.api_helpers import V1, assert_error
from tests.conftest import make_client

BASE_DIR = Path(settings.BASE_DIR)
REQUEST_TIMEOUT = 30


@pytest.fixture
def limits(settings: Any) -> Any:
    """Small limits: 3 requests a minute per key, 2 per address without one."""

    def set_rates(key: str = "3/min", anon: str = "2/min") -> None:
        settings.REST_FRAMEWORK = {
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": {"key": key, "anon": anon},
        }

    set_rates()
    return set_rates


def assert_throttled(response: Any) -> None:
    assert_error(response, 429, "throttled")
    assert 1 <= int(response["Retry-After"]) <= 60


@pytest.mark.django_db
def test_a_key_over_its_limit_gets_429_with_retry_after(limits, api, stranger_api, workspace):
    for _ in range(3):
        assert api.get(f"{V1}/workflow/").status_code == 200
    assert_throttled(api.get(f"{V1}/workflow/"))
    assert_throttled(api.post(f"{V1}/sessions/", {"agent": "a"}, format="json"))
    # Another key, of this workspace or another, counts on its own.
    _, raw = ApiKey.issue(workspace, "second")
    assert make_client(raw).get(f"{V1}/workflow/").status_code == 200
    assert stranger_api.get(f"{V1}/workflow/").status_code == 200


@pytest.mark.django_db
def test_requests_without_a_key_are_limited_per_address(limits, workspace):
    # The public schema: anyone may fetch it, each address twice a minute here.
    here, there = APIClient(REMOTE_ADDR="10.0.0.1"), APIClient(REMOTE_ADDR="10.0.0.2")
    url = f"{V1}/schema/?format=json"
    for _ in range(2):
        assert here.get(url).status_code == 200
    throttled = here.get(url)
    assert throttled.status_code == 429
    assert throttled.json()["code"] == "throttled" and int(throttled["Retry-After"]) >= 1
    assert there.get(url).status_code == 200
    # A key from the same address is counted per key, not per address.
    _, raw = ApiKey.issue(workspace)
    keyed = make_client(raw)
    keyed.defaults["REMOTE_ADDR"] = "10.0.0.1"
    assert keyed.get(f"{V1}/workflow/").status_code == 200


@pytest.mark.django_db
def test_a_logged_in_person_without_a_key_counts_per_address(limits, workspace):
    user = get_user_model().objects.create_user("ana", password="pw-ana-123")
    workspace.members.add(user)
    client = APIClient(REMOTE_ADDR="10.0.0.3", HTTP_X_PROJEKTOR_WORKSPACE=workspace.slug)
    client.force_login(user)
    for _ in range(2):
        assert client.get(f"{V1}/projects/").status_code == 200
    assert_throttled(client.get(f"{V1}/projects/"))


@pytest.mark.django_db
def test_x_forwarded_for_is_not_trusted_without_proxies(limits):
    client = APIClient(REMOTE_ADDR="10.0.0.4")
    url = f"{V1}/schema/?format=json"
    for n in range(2):
        assert client.get(url, HTTP_X_FORWARDED_FOR=f"192.0.2.{n}").status_code == 200
    assert client.get(url, HTTP_X_FORWARDED_FOR="192.0.2.9").status_code == 429


@pytest.mark.django_db
def test_the_window_resets(limits, api, monkeypatch):
    clock = [1_000_000.0]
    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: clock[0]))
    for _ in range(3):
        assert api.get(f"{V1}/workflow/").status_code == 200
    refused = api.get(f"{V1}/workflow/")
    assert refused.status_code == 429 and refused["Retry-After"] == "20"  # 1_000_020 = 60 n
    clock[0] += 20
    assert api.get(f"{V1}/workflow/").status_code == 200


@pytest.mark.django_db
def test_an_unreachable_redis_lets_requests_through(limits, api, settings, caplog):
    settings.CACHES = {
        **settings.CACHES,
        "throttle": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{_free_port()}/0",  # nothing listens there
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        },
    }
    for _ in range(5):  # over the limit of 3, yet served
        assert api.get(f"{V1}/workflow/").status_code == 200
    assert "Redis is unavailable" in caplog.text


@pytest.mark.parametrize(
    "rate", ["6000/min", "120/min", "5/s", "100/hour", "1/day", "10/second", "7/minute"]
)
def test_rates_parse(rate):
    count, seconds = throttling.parse_rate(rate)
    assert count == int(rate.split("/")[0]) and seconds in {1, 60, 3600, 86400}


def test_a_bad_rate_in_the_environment_stops_startup():
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**_base_env(), "PROJEKTOR_THROTTLE_KEY": "lots"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=BASE_DIR,
    )
    assert result.returncode != 0 and "PROJEKTOR_THROTTLE_KEY" in result.stderr


# --- across processes: two gunicorn servers share one counter -------------------------

LIMIT = 12
# Parallel clients, each alternating between the two servers. Before a server's first
# answer at most 3 + 6 requests are counted (a client waits for each answer before
# its next request), fewer than LIMIT: each server allows some.
CONNECTIONS = 6


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}}
    env.update(SECRET_KEY="test-only-secret-key", DJANGO_SETTINGS_MODULE="projektor.settings")
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _redis_url() -> str:
    """A Redis for the test (REDIS_URL, else a local one); skip if there is none."""
    import redis

    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15"
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError:
        if os.environ.get("REDIS_URL"):
            raise
        pytest.skip(f"no Redis at {url} (set REDIS_URL)")
    return url


def _unshared_key_id() -> int:
    """The counter is named by the key's id, and a Redis may serve other suites at
    the same time (whose first keys have the same ids): an id no other run uses."""
    return 10**12 + secrets.randbelow(10**12)


def _sqlite_database_with_key(path: Path, env: dict[str, str]) -> str:
    """A migrated SQLite file with a workspace and a key; return the raw key."""
    script = (
        "import django; django.setup()\n"
        "from django.core.management import call_command\n"
        "call_command('migrate', verbosity=0)\n"
        "from coordination.models import ApiKey, Workspace\n"
        "key, raw = ApiKey.issue(Workspace.objects.create(slug='w', name='W'))\n"
        f"ApiKey.objects.filter(pk=key.pk).update(id={_unshared_key_id()})\n"
        "print(raw)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env={**env, "DATABASE_URL": f"sqlite:///{path}"},
        capture_output=True,
        text=True,
        timeout=180,
        cwd=BASE_DIR,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def _outside_window_edge(period: int, margin: float = 30) -> None:
    """Do not start a burst in the last seconds of a fixed window (it would reset)."""
    left = period - time.time() % period
    if left < margin:
        time.sleep(left + 1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("cache", ["database", "redis"])
def test_two_gunicorn_workers_share_the_counter(cache, tmp_path, workspace):
    """Two servers of one worker each, every client alternating between them: each
    server answers half the requests, more than LIMIT, so a counter of each process's
    own would allow LIMIT on each; a shared one allows LIMIT in all."""
    overrides: dict[str, str | None] = {
        "PROJEKTOR_THROTTLE_KEY": f"{LIMIT}/day",
        "REDIS_URL": _redis_url() if cache == "redis" else None,
    }
    if connection.vendor == "postgresql":
        # The test database itself: the key made here is committed (transaction=True).
        overrides["DATABASE_URL"] = harness.database_url(connection.settings_dict)
        key, raw = ApiKey.issue(workspace, "fleet")
        ApiKey.objects.filter(pk=key.pk).update(id=_unshared_key_id())
        env = harness.app_environment(overrides)
        if cache == "database" and not isinstance(caches["throttle"], BaseDatabaseCache):
            # This suite runs on Redis, so migrate made no cache tables: make them.
            result = subprocess.run(
                [sys.executable, "manage.py", "createcachetable"],
                env=env,
                cwd=BASE_DIR,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert result.returncode == 0, result.stderr
    else:
        # pytest-django's SQLite database lives in this process's memory: use a file.
        overrides["DATABASE_URL"] = f"sqlite:///{tmp_path / 'db.sqlite3'}"
        env = harness.app_environment(overrides)
        raw = _sqlite_database_with_key(tmp_path / "db.sqlite3", env)

    with ExitStack() as servers:
        ports = [
            servers.enter_context(
                harness.gunicorn(env=env, workers=1, log_path=tmp_path / f"{n}.log")
            ).port
            for n in range(2)
        ]
        _outside_window_edge(86400)
        answers = _burst(ports, raw, requests=3 * LIMIT, connections=CONNECTIONS)

    statuses = Counter(status for _, status, _, _ in answers)
    assert statuses == {200: LIMIT, 429: 2 * LIMIT}, statuses
    for _, status, retry_after, body in answers:
        if status == 429:
            assert b'"code":"throttled"' in body and int(retry_after) >= 1
    for port in ports:
        served = Counter(status for by, status, _, _ in answers if by == port)
        assert served.total() == 3 * LIMIT // 2, (port, served)
        assert served[200] and served[429], f"server {port} did not both allow and refuse"


def _burst(ports: list[int], raw_key: str, requests: int, connections: int) -> list[Any]:
    """``requests`` GETs over ``connections`` parallel clients, each sending its n-th
    request to ``ports[(client + n) % 2]``: (port, status, Retry-After, body)."""
    answers: list[Any] = []
    lock = threading.Lock()
    barrier = threading.Barrier(connections)

    def client(index: int, count: int) -> None:
        barrier.wait()
        for n in range(count):
            port = ports[(index + n) % len(ports)]
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
            conn.request("GET", f"{V1}/workflow/", headers={"Authorization": f"Bearer {raw_key}"})
            response = conn.getresponse()
            answer = (port, response.status, response.getheader("Retry-After"), response.read())
            conn.close()
            with lock:
                answers.append(answer)

    share = [requests // connections + (i < requests % connections) for i in range(connections)]
    threads = [threading.Thread(target=client, args=(i, n)) for i, n in enumerate(share)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=REQUEST_TIMEOUT * requests)
    assert len(answers) == requests
    return answers


@pytest.mark.postgres
@pytest.mark.django_db
def test_postgresqls_counter_table_is_made_unlogged():
    """An increment writes no WAL: migrate leaves the counters' table UNLOGGED, and
    makes a logged one (a restore, an older install) unlogged again."""
    if not isinstance(caches["throttle"], BaseDatabaseCache):
        pytest.skip("the counters are in Redis here (REDIS_URL), not in a table")
    table = settings.CACHES["throttle"]["LOCATION"]

    def persistence() -> str:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT relpersistence FROM pg_class WHERE oid = to_regclass(%s)", [table]
            )
            return str(cursor.fetchone()[0])

    assert persistence() == "u"
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {connection.ops.quote_name(table)} SET LOGGED")
    assert persistence() == "p"
    rate_limits.prepare_counter_table("default")
    assert persistence() == "u"
