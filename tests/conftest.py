"""Shared fixtures: two workspaces (ours and a stranger's), keys, clients, the people
(alice, bob, charlie and the operator), helpers.

The suite runs on SQLite by default and on PostgreSQL when DATABASE_URL points
there. Tests marked ``postgres`` (real concurrency) are deselected on SQLite by
``make test``; when CI=true they fail instead of skipping if PostgreSQL is absent.
"""

import os
import shutil
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection, connections
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from coordination.models import AgentSession, ApiKey, Issue, Project, Workspace
from coordination.services import agents

IN_CI = os.environ.get("CI", "").lower() == "true"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--window-size=1400,1000",
)
BROWSER_WAIT = 20  # seconds; plotly.js is 4.8 MB of script to parse on a cold start


@pytest.fixture(autouse=True)
def _postgres_only(request: pytest.FixtureRequest) -> None:
    """A ``postgres`` test on another backend skips locally and fails in CI."""
    if request.node.get_closest_marker("postgres") and connection.vendor != "postgresql":
        if IN_CI:
            pytest.fail("CI=true: this test needs PostgreSQL; point DATABASE_URL at it")
        pytest.skip("needs PostgreSQL (set DATABASE_URL)")


@pytest.fixture(scope="session", autouse=True)
def _flush_opens_the_logs() -> Iterator[None]:
    """Between transactional tests the database is flushed. PostgreSQL truncates (no
    row triggers fire); SQLite deletes row by row, which the append-only logs refuse:
    the flush runs in maintenance mode (the logs' door open for every workspace)."""
    from django.core.management.commands import flush

    from coordination.services.logs import EVERY_WORKSPACE, unlocked

    handle = flush.Command.handle

    def handle_with_logs_open(self: Any, **options: Any) -> Any:
        if connections[options.get("database", "default")].vendor != "sqlite":
            return handle(self, **options)
        with unlocked(EVERY_WORKSPACE):
            return handle(self, **options)

    flush.Command.handle = handle_with_logs_open  # type: ignore[method-assign]
    yield
    flush.Command.handle = handle  # type: ignore[method-assign]


def make_client(raw_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


@pytest.fixture
def workspace(db: None) -> Workspace:
    return Workspace.objects.create(slug="acme", name="Acme")


@pytest.fixture
def other_workspace(db: None) -> Workspace:
    return Workspace.objects.create(slug="globex", name="Globex")


@pytest.fixture
def api(workspace: Workspace) -> APIClient:
    """Alice's agent fleet: an API client with a key of ``workspace``."""
    _, raw = ApiKey.issue(workspace, "fleet")
    return make_client(raw)


@pytest.fixture
def stranger_api(other_workspace: Workspace) -> APIClient:
    """Charlie: a key of another workspace."""
    _, raw = ApiKey.issue(other_workspace, "stranger")
    return make_client(raw)


def password_of(username: str) -> str:
    return f"pw-{username}-123"


@pytest.fixture
def alice(workspace: Workspace, django_user_model: Any) -> Any:
    """A member of ``workspace`` who is not staff: a manager reading her fleet's pages."""
    user = django_user_model.objects.create_user("alice", password=password_of("alice"))
    workspace.members.add(user)
    return user


@pytest.fixture
def bob(workspace: Workspace, django_user_model: Any) -> Any:
    """Alice's teammate: another member of ``workspace``, not staff."""
    user = django_user_model.objects.create_user("bob", password=password_of("bob"))
    workspace.members.add(user)
    return user


@pytest.fixture
def charlie(db: None, django_user_model: Any) -> Any:
    """A stranger: a user of no workspace."""
    return django_user_model.objects.create_user("charlie", password=password_of("charlie"))


@pytest.fixture
def ops(db: None, django_user_model: Any) -> Any:
    """The operator: a superuser, who runs the admin."""
    return django_user_model.objects.create_superuser("ops", password=password_of("ops"))


@pytest.fixture
def operator(client: Client, ops: Any) -> Client:
    """A browser logged in as the operator."""
    client.force_login(ops)
    return client


@pytest.fixture
def project(workspace: Workspace) -> Project:
    return Project.objects.create(workspace=workspace, key="core", name="Core", agent_wip_limit=3)


@pytest.fixture
def make_issue(project: Project) -> Callable[..., Issue]:
    def make(**fields: Any) -> Issue:
        fields.setdefault("project", project)
        fields.setdefault("title", "An issue")
        fields.setdefault("description", "Done when it works.")
        return Issue.objects.create(workspace=fields["project"].workspace, **fields)

    return make


@pytest.fixture
def issue(make_issue: Callable[..., Issue]) -> Issue:
    return make_issue(title="Fix the login flow")


@pytest.fixture
def make_session(workspace: Workspace) -> Callable[..., AgentSession]:
    def make(agent: str = "coder-1", **kwargs: Any) -> AgentSession:
        return agents.register_session(
            workspace=kwargs.pop("workspace", workspace), agent_name=agent, **kwargs
        )

    return make


def expire(session: AgentSession, *, seconds_past_ttl: int = 5) -> None:
    """Move the session's last heartbeat back past the TTL: it is no longer live."""
    stale = timezone.now() - timedelta(
        seconds=settings.PROJEKTOR_SESSION_TTL_SECONDS + seconds_past_ttl
    )
    AgentSession.objects.filter(pk=session.pk).update(last_heartbeat_at=stale)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium through Debian's chromedriver (``make test`` installs both);
    without them a test skips locally and fails in CI, like the PostgreSQL tests."""
    if not (Path(CHROMEDRIVER).exists() and shutil.which("chromium")):
        if IN_CI:
            pytest.fail("CI=true: the browser test needs Debian's chromium and chromium-driver")
        pytest.skip("needs chromium and chromium-driver (make test installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(autouse=True)
def throttle_clock(monkeypatch: pytest.MonkeyPatch) -> float:
    """Hold the rate limits' clock still for the test, at the time it starts.

    A limit counts in fixed windows, and a window's first request also forgets the
    ended windows (one more statement). A test that counts to a limit, or counts an
    API call's statements, failed when the minute turned between two of its requests,
    which on a busy machine it now and then does. Returns the time the limits see.
    (A test of the window itself moves this clock; servers in other processes keep
    the real one.)
    """
    from coordination.api import throttling

    now = time.time()
    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: now))
    return now


@pytest.fixture(autouse=True)
def _fresh_rate_limits(request: pytest.FixtureRequest) -> None:
    """Every test starts with no request counted against any key or address.

    On the database cache the counters are rows beside the test's data, kept by a
    test that commits; on SQLite they are in a file beside the test database, which
    is made for the first test that uses it. A test that does not use the database
    has none to clear.
    """
    from django.core.cache import caches
    from django.core.cache.backends.db import BaseDatabaseCache

    from coordination.services import rate_limits
    from projektor.counters import SQLiteCounterCache

    if isinstance(caches[rate_limits.CACHE_ALIAS], BaseDatabaseCache | SQLiteCounterCache):
        if not request.node.get_closest_marker("django_db") and (
            "_django_db_helper" not in request.fixturenames
        ):
            return
        request.getfixturevalue("_django_db_helper")
    rate_limits.clear()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    django_db_modify_db_settings_parallel_suffix: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """SQLite's test database is a file, as in production, not shared-cache memory:
    there, connections of other threads (the webhook worker's pool, waiters) lock
    whole tables against each other and fail at once instead of waiting their turn."""
    database = settings.DATABASES["default"]
    if "sqlite3" in database["ENGINE"]:
        folder = tmp_path_factory.mktemp("sqlite")
        database.setdefault("TEST", {})["NAME"] = str(folder / "test.sqlite3")


@pytest.fixture(autouse=True)
def _no_cached_keys() -> None:
    """Every test starts with no API key kept by this process (``services.keys``): a
    rolled-back test's rows, and on SQLite its ids, can come back in the next one."""
    from coordination.services.keys import forget_cached_keys

    forget_cached_keys()


@pytest.fixture(autouse=True)
def _event_listener_stopped() -> Iterator[None]:
    """A long-poll on PostgreSQL starts this process's LISTEN thread on the test
    database: stop it after the test, or its connection keeps the database from
    being dropped at the end of the run."""
    yield
    from coordination import feed

    feed.wakeups.stop()


# --- across both cores (pytest-xdist, ``make test``) -----------------------------------

# Tests that must not run beside one another go to one worker, in turn (``--dist
# loadgroup``), by where they live. Every other test goes to whichever worker is free.
XDIST_GROUPS = {
    # The bench's server and agents, and 16 to 64 threads each holding a connection:
    # two of them at once would pass PostgreSQL's 100 connections.
    "tests/coordination/races/": "many-connections",
    "tests/benchmarks/test_bench.py": "many-connections",
    "tests/benchmarks/test_bench_fleet.py": "many-connections",
    # gunicorn with waiters in a resource's line, and heartbeats or a runner beside them.
    "tests/benchmarks/test_bench_resources.py": "many-connections",
    "tests/benchmarks/test_bench_runner.py": "many-connections",
    "tests/coordination/api/test_resources_live.py": "many-connections",
    # One live server for the run (its database named after the configured one and the
    # worker process, so a second server, should the group ever be split, has its own).
    "tests/agent/": "agent-live-server",
    # gunicorn and the demo fleet's runners and agents: one such run at a time.
    "tests/demo/test_demo_fleet.py": "demo-fleet",
    "tests/demo/test_demo_stalls.py": "demo-fleet",
}


# The races hold up to 65 of PostgreSQL's 97 connections for users: beside another
# worker's live servers and runners they found it full ("too many clients"). Marked
# ``alone``, the PostgreSQL pass runs them after the rest, in one process
# (``make test-postgres``); a group alone cannot keep the other worker's tests away.
ALONE = ("tests/coordination/races/",)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the items
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    in_a_stable_order(items)
    for item in items:
        path = item.path.relative_to(config.rootpath).as_posix()
        for prefix, group in XDIST_GROUPS.items():
            if path.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))
        if path.startswith(ALONE):
            item.add_marker(pytest.mark.alone)


class QuickPasswordHasher(PBKDF2PasswordHasher):
    """Django's PBKDF2 with a thousand iterations, not a million: the tests' users are
    made in a millisecond, not a quarter of a second each. The same algorithm and
    format (the count is in the hash), so a live server started by a test checks these
    passwords with its own hasher."""

    iterations = 1_000


def pytest_configure(config: pytest.Config) -> None:
    """The quick password hasher; and on Redis, each worker counts under a key prefix
    of its own: clearing one test's counters must not clear those of the test running
    beside it."""
    settings.PASSWORD_HASHERS = ["tests.conftest.QuickPasswordHasher"]
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and settings.REDIS_URL:
        for cache in settings.CACHES.values():
            cache["KEY_PREFIX"] = f"{cache.get('KEY_PREFIX') or 'projektor'}-{worker}"


def pytest_sessionstart(session: pytest.Session) -> None:
    """The harness collects the static files before it starts gunicorn: with workers,
    the controller does it once first, so that no two workers copy them at once."""
    config = session.config
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        from benchmarks.server import collect_static_files

        collect_static_files()


def in_a_stable_order(items: list[pytest.Item]) -> None:
    """Each test's cases in the order of their ids, where the test's first case was.
    Some cases come from an unordered source (the API fuzz's from the schema's methods,
    a set), and every worker must collect the same list in the same order."""
    first_case: dict[tuple[str, str], int] = {}

    def test_of(item: pytest.Item) -> tuple[str, str]:
        parent = item.parent.nodeid if item.parent else ""
        return parent, item.name.split("[", 1)[0]

    for index, item in enumerate(items):
        first_case.setdefault(test_of(item), index)
    items.sort(key=lambda item: (first_case[test_of(item)], item.name))
