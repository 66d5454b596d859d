"""Waiting for a resource under gunicorn as deployed (the bench's harness): calls waiting in
a resource's line give their place up while they sleep (``coordination.idle``), so a
server with two working threads still answers heartbeats while many more calls wait;
and the line is served in order once the unit comes back (invariant 20 (resources are
counted)). Both databases.
"""

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks import server as harness
from coordination.models import ApiKey, ResourceWait, Workspace
from coordination.services import agents, resources
from tests.api_helpers import V1
from tests.coordination.api.test_events_live import in_thread
from tests.faults.client import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

WAITERS = 10  # five times the server's working threads
WAIT_SECONDS = 60
DEADLINE = 90  # seconds, for anything a step waits on


@pytest.fixture
def server(tmp_path: Path, file_database) -> Iterator[harness.Server]:
    on_file = {} if file_database is None else {"DATABASE_URL": f"sqlite:///{file_database}"}
    env = harness.environment_on_this_database(
        {
            **on_file,
            "SECRET_KEY": "resources-live-only",
            "REDIS_URL": None,
            "PROJEKTOR_WAITING_THREADS": "16",  # gunicorn.conf.py's own default is 32
        }
    )
    with harness.gunicorn(env=env, workers=1, threads=2, log_path=tmp_path / "server.log") as one:
        yield one


def client(server: harness.Server, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"http://{server.host}:{server.port}{V1}",
        headers={"Authorization": f"Bearer {key}"},
        timeout=DEADLINE,
    )


def test_many_waiters_leave_the_working_threads_to_heartbeats_and_are_served_in_order(
    workspace: Workspace, server: harness.Server
):
    def set_up() -> tuple[str, int, list[int]]:
        _, key = ApiKey.issue(workspace, "fleet")
        resources.create_resource(workspace=workspace, name="db:test", capacity=1)
        holder = agents.register_session(workspace=workspace, agent_name="holder")
        resources.acquire(workspace=workspace, name="db:test", session_id=holder.pk)
        waiters = [
            agents.register_session(workspace=workspace, agent_name=f"waiter-{n}").pk
            for n in range(WAITERS)
        ]
        return key, holder.pk, waiters

    key, holder, waiters = in_thread(set_up)
    granted: list[int] = []
    answers: list[int] = []
    lock = threading.Lock()

    def wait_for_a_unit(session: int) -> None:
        with client(server, key) as http:
            answer = http.post(
                "/resources/db:test/acquire/", json={"session": session, "wait": WAIT_SECONDS}
            )
            with lock:
                answers.append(answer.status_code)
                if answer.status_code == 201:
                    granted.append(session)
            if answer.status_code == 201:
                http.post("/resources/db:test/release/", json={"session": session})

    def in_line() -> int:
        return int(in_thread(lambda: ResourceWait.objects.count()))

    threads = []
    for joined, session in enumerate(waiters, start=1):  # one after another: a known order
        thread = threading.Thread(target=wait_for_a_unit, args=(session,))
        thread.start()
        threads.append(thread)
        wait_until(lambda n=joined: in_line() == n, DEADLINE, "the waiter in line")

    with client(server, key) as http:
        # Two working threads, ten calls waiting: a heartbeat is still answered.
        beat = http.post(f"/sessions/{holder}/heartbeat/")
        assert beat.status_code == 200, beat.text
        listed = http.get("/resources/db:test/").json()
        assert listed["waiting"] == WAITERS and listed["in_use"] == 1
        http.post("/resources/db:test/release/", json={"session": holder})
    for thread in threads:
        thread.join(timeout=DEADLINE)
    assert answers == [201] * WAITERS, answers
    assert granted == waiters  # in order of arrival
    assert in_line() == 0
