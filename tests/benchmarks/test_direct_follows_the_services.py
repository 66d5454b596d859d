"""The direct ceiling follows the services, so that it fails here when they drift apart.

Each operation the bench runs goes once through the API (django.test.Client: the
middleware, DRF, the services), recording every statement the services send through
``coordination.db.rows`` with the rows it got back. The direct driver then runs
the same operation for the same agent, session and issue against those rows, replayed:
it must send the same statements (SQL text and parameters) in the same order, and
reach the answer the API gave. What it needs of Django's side comes from the command's
``direct_target``, which must hand it the services' own values.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from django.conf import settings
from rest_framework.settings import api_settings

from benchmarks import environment
from benchmarks.direct import DirectDriver, DirectTarget
from benchmarks.workload import AgentPlan
from coordination.db import rows, sql
from coordination.db.rows import dialect
from coordination.models import AgentSession, ApiKey, Issue, Project, Workspace, hash_api_key
from coordination.paths import lock_nodes
from coordination.services import keys, locking
from coordination.services.file_claims import claim
from tests.conftest import make_client

pytestmark = pytest.mark.django_db(transaction=True)  # the NOTIFY after a commit, too

V1 = "/api/v1"
TRANSACTION_CONTROL = {"BEGIN", "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"}
PATHS = ["src/core/a.py", "src/core/b.py"]
TREE, UNDER_TREE = "src/tree/", "src/tree/deep/module.py"


@dataclass
class Exchange:
    """One statement the services sent, and what came back."""

    sql: str
    params: list[Any]
    rows: list[tuple[Any, ...]]
    rowcount: int


class RecordingCursor:
    """Django's cursor for the services' statements, keeping each exchange."""

    def __init__(self, real: Any, log: list[Exchange]) -> None:
        self.real, self.log, self.fetched = real, log, []

    def __enter__(self) -> "RecordingCursor":
        self.real.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.real.__exit__(*exc)

    def execute(self, sql: str, params: Any = ()) -> None:
        self.real.execute(sql, params)
        returned = list(self.real.fetchall()) if self.real.description else []
        self.fetched = list(returned)
        self.log.append(Exchange(sql, list(params), returned, self.real.rowcount))

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.fetched.pop(0) if self.fetched else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        taken, self.fetched = self.fetched, []
        return taken

    @property
    def rowcount(self) -> int:
        return self.log[-1].rowcount


class Replayed:
    """A cursor answering with the rows the services' statement got."""

    def __init__(self, exchange: Exchange) -> None:
        self.rows = list(exchange.rows)
        self.rowcount = exchange.rowcount

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


class ReplayingDriver(DirectDriver):
    """The direct driver, its statements checked one by one against the services'."""

    def __init__(self, plan: AgentPlan, target: DirectTarget, session_id: int) -> None:
        super().__init__(plan, target)
        self.session_id = session_id
        self.expected: list[Exchange] = []

    def run(self, text: str, params: Any = ()) -> Any:
        if text in TRANSACTION_CONTROL:  # Django's atomic() sends these itself
            return None
        assert self.expected, f"the driver sent a statement the services did not:\n{text}"
        exchange = self.expected.pop(0)
        assert (text, list(params)) == (exchange.sql, exchange.params)
        return Replayed(exchange)


@dataclass
class Bench:
    """One agent's session in a workspace, as the bench's agents have."""

    workspace: Workspace
    raw_key: str
    session_id: int
    agent_id: int
    issues: dict[str, int]
    client: Any
    recorded: list[Exchange] = field(default_factory=list)
    kept_key: tuple[int, int] | None = None  # the driver's, carried from call to call

    def target(self) -> DirectTarget:
        # What direct_target reads of the bench's workspace.
        bench = SimpleNamespace(pk=self.workspace.pk, key_hash=hash_api_key(self.raw_key))
        return environment.direct_target(bench, {*PATHS, TREE, UNDER_TREE})

    def through_the_api(self, method: str, path: str, body: Any = None) -> int:
        self.recorded.clear()
        call = getattr(self.client, method)
        response = call(V1 + path, body, format="json") if body else call(V1 + path)
        return int(response.status_code)

    def directly(self, issue: str, operation: Callable[[ReplayingDriver], str]) -> str:
        plan = AgentPlan(
            scenario="drift",
            index=0,
            agent_name="direct",
            agent_id=self.agent_id,
            workspace_id=self.workspace.pk,
            issue_id=self.issues[issue],
            paths=tuple(PATHS),
            seconds=0.0,
            seed=0,
        )
        driver = ReplayingDriver(plan, self.target(), self.session_id)
        driver.expected = list(self.recorded)
        driver.kept_key = self.kept_key  # one agent: the key read once, then kept
        outcome = operation(driver)
        self.kept_key = driver.kept_key
        assert not driver.expected, f"the driver left out {driver.expected[0].sql}"
        return outcome


@pytest.fixture
def bench(
    workspace: Workspace, project: Project, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Bench]:
    # Counted requests would add the rate limiter's statements to the services'.
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"key": None, "anon": None},
    }
    issues = {
        name: Issue.objects.create(workspace=workspace, project=project, title=name).pk
        for name in ("lease", "files", "rival")
    }
    raw_key = ApiKey.issue(workspace, "bench")[1]
    client = make_client(raw_key)
    session_id = client.post(f"{V1}/sessions/", {"agent": "direct"}, format="json").json()["id"]
    agent_id = AgentSession.objects.get(pk=session_id).agent_id
    found = Bench(workspace, raw_key, session_id, agent_id, issues, client)
    keys.forget_cached_keys()  # the service and the driver both read the key first
    real_cursor = rows.cursor
    monkeypatch.setattr(rows, "cursor", lambda *a: RecordingCursor(real_cursor(*a), found.recorded))
    yield found


def test_the_target_carries_the_services_own_values(bench):
    target = bench.target()
    assert target.closed_statuses == {str(status) for status in Issue.CLOSED_STATUSES}
    assert target.conflicts_shown is claim.MAX_CONFLICTS_SHOWN
    assert target.page_size == api_settings.PAGE_SIZE == settings.REST_FRAMEWORK["PAGE_SIZE"]
    assert target.dialect == dialect()
    assert target.key_hash == hash_api_key(bench.raw_key)
    assert target.advisory_namespace == sql.ADVISORY_LOCK_KEYS["file_claim_path"]
    assert target.event_namespace == sql.ADVISORY_LOCK_KEYS["event_log"]
    assert target.lock_keys == {
        node: locking.path_lock_key(bench.workspace.pk, node)
        for node in lock_nodes({*PATHS, TREE, UNDER_TREE})
    }


def test_heartbeat_and_the_lists(bench):
    session = bench.session_id
    assert bench.through_the_api("post", f"/sessions/{session}/heartbeat/") == 200
    assert bench.directly("lease", DirectDriver.heartbeat) == "200"
    assert bench.through_the_api("get", "/sessions/?live=true") == 200
    assert bench.directly("lease", DirectDriver.list_live_sessions) == "200"
    assert bench.through_the_api("get", "/issues/ready/") == 200
    assert bench.directly("lease", DirectDriver.list_ready_issues) == "200"


def test_a_lease_claimed_and_released(bench):
    lease, mine = bench.issues["lease"], {"session": bench.session_id}
    assert bench.through_the_api("post", f"/issues/{lease}/claim/", mine) == 201
    assert bench.directly("lease", DirectDriver.claim_issue) == "201"
    assert bench.through_the_api("post", f"/issues/{lease}/release/", mine) == 200
    assert bench.directly("lease", DirectDriver.release_issue) == "200"


@pytest.mark.parametrize(("claimed", "refused"), [(PATHS, PATHS), ([TREE], [UNDER_TREE])])
def test_files_claimed_refused_to_a_rival_and_released(bench, claimed, refused):
    files, rival, session = bench.issues["files"], bench.issues["rival"], bench.session_id
    body = {"issue": files, "session": session, "paths": claimed}
    assert bench.through_the_api("post", "/file-claims/", body) == 201
    assert bench.directly("files", lambda driver: driver.claim_files(claimed)) == "201"

    body = {"issue": rival, "session": session, "paths": refused}
    assert bench.through_the_api("post", "/file-claims/", body) == 409
    assert bench.directly("rival", lambda driver: driver.claim_files(refused)) == "conflict"

    body = {"issue": files, "session": session}
    assert bench.through_the_api("post", "/file-claims/release/", body) == 200
    assert bench.directly("files", DirectDriver.release_files) == "200"
