"""A revoked or an expired key is refused at once by every app process (invariant 13 (the key is the
actor)): four gunicorn workers (the bench's harness) on the test database, each made to answer
in turn, before and after.

Each worker is made to answer alone by freezing the others (SIGSTOP): only a running
worker accepts from the shared socket. So every one of the four has served the key
before it is revoked (a per-process cache would hold it then), and every one refuses
it after. Waits are on conditions (the database's clock passing the expiry), bounded.
"""

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from benchmarks import server as harness
from coordination.db.rows import dialect
from coordination.models import ApiKey
from tests.faults.client import Outcome, call, wait_until

WORKERS = 4
EXPIRY_SECONDS = 15  # long enough to have every worker answer first, on a busy machine


@pytest.fixture
def server(tmp_path: Path, transactional_db: None) -> Iterator[harness.Server]:
    env = harness.environment_on_this_database({"SECRET_KEY": "keys-across-workers-only"})
    with harness.gunicorn(
        env=env, workers=WORKERS, threads=1, log_path=tmp_path / "gunicorn.log"
    ) as running:
        yield running


@contextmanager
def alone(server: harness.Server, pid: int) -> Iterator[None]:
    """Only worker ``pid`` accepts connections while the block runs."""
    others = [other for other in server.worker_pids() if other != pid]
    for other in others:
        os.kill(other, signal.SIGSTOP)
    try:
        yield
    finally:
        for other in others:
            with suppress(ProcessLookupError):
                os.kill(other, signal.SIGCONT)


def each_worker(server: harness.Server, path: str, raw: str) -> dict[int, Outcome]:
    """``GET path`` with ``raw``, answered by each worker alone."""
    pids = server.worker_pids()
    assert len(pids) == WORKERS, pids
    answers = {}
    for pid in pids:
        with alone(server, pid):
            answers[pid] = call(server.port, "GET", path, raw)
    return answers


def statuses(answers: dict[int, Outcome]) -> set[Any]:
    return {(outcome.status, outcome.code) for outcome in answers.values()}


def test_a_revoked_key_is_refused_by_every_worker_at_once(server, workspace):
    _, fleet = ApiKey.issue(workspace, "orchestrator")
    body = {"name": "coder-1", "kind": "agent", "agent": "coder-1"}
    minted = call(server.port, "POST", "/keys/", fleet, body)
    assert minted.status == 201, minted.body
    agent = minted.body["key"]
    assert statuses(each_worker(server, "/keys/me/", agent)) == {(200, None)}

    revoked = call(server.port, "POST", f"/keys/{minted.body['id']}/revoke/", fleet, {})
    assert revoked.status == 200, revoked.body
    assert statuses(each_worker(server, "/keys/me/", agent)) == {(401, "unauthenticated")}
    assert statuses(each_worker(server, "/keys/me/", fleet)) == {(200, None)}


def test_an_expired_key_is_refused_by_every_worker_from_its_expiry(server, workspace):
    _, fleet = ApiKey.issue(workspace, "orchestrator")
    expires = timezone.now() + timedelta(seconds=EXPIRY_SECONDS)
    body = {"name": "dashboard", "kind": "read", "expires_at": expires.isoformat()}
    minted = call(server.port, "POST", "/keys/", fleet, body)
    assert minted.status == 201, minted.body
    reader = minted.body["key"]
    served = each_worker(server, "/issues/", reader)
    key = ApiKey.objects.get(pk=minted.body["id"])
    assert key.expires_at is not None
    assert statuses(served) == {(200, None)}, "the workers were too slow to answer before expiry"

    def expired() -> bool:  # judged as the app judges it: by the database's clock
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM coordination_apikey WHERE id = %s AND expires_at <= {now}",
                [key.pk],
            )
            return cursor.fetchone() is not None

    now = dialect().now()
    wait_until(expired, EXPIRY_SECONDS + 30, "the key's expiry")
    assert statuses(each_worker(server, "/issues/", reader)) == {(401, "unauthenticated")}
