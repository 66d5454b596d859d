"""``session.stalled`` (invariant 17 (stalled is derived)): once per stall, written by the
long-running worker (``deliver_webhooks``) that looks for newly stalled sessions. The stall
threshold is short and the last progress moved back explicitly; every wait is on a
condition."""

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from coordination import feed
from coordination.models import AgentSession, Event, EventType
from coordination.services import agents, progress
from coordination.webhook_worker import Worker, run_in_thread
from tests.conftest import expire
from tests.coordination.webhook_receiver import DEADLINE, wait_until

STALL_AFTER = 30


@pytest.fixture(autouse=True)
def _short_stall(settings: Any) -> None:
    settings.PROJEKTOR_STALL_AFTER_SECONDS = STALL_AFTER


def set_back(session: AgentSession) -> None:
    stamp = timezone.now() - timedelta(seconds=STALL_AFTER + 5)
    AgentSession.objects.filter(pk=session.pk).update(last_progress_at=stamp)


def stalled_events(session: AgentSession) -> list[Event]:
    return list(Event.objects.filter(type=EventType.SESSION_STALLED, session_id=session.pk))


@pytest.mark.django_db
def test_a_stall_is_announced_once_and_again_after_new_progress(workspace, make_session):
    session, moving, dead = make_session("stuck"), make_session("moving"), make_session("dead")
    set_back(session)
    set_back(dead)
    expire(dead)
    assert progress.announce_stalls() == 1
    assert progress.announce_stalls() == 0  # once per stall
    [event] = stalled_events(session)
    since = AgentSession.objects.get(pk=session.pk).last_progress_at
    assert event.data == {"since": since.isoformat()} and event.agent_id == session.agent_id
    assert not stalled_events(moving) and not stalled_events(dead)
    agents.report_progress(workspace=workspace, session_id=session.pk)
    assert progress.announce_stalls() == 0  # moving again
    set_back(session)
    assert progress.announce_stalls() == 1
    assert len(stalled_events(session)) == 2


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Worker]:
    monkeypatch.setattr(feed.Wakeups, "ensure_listener", lambda self: None)
    worker = Worker(threads=1, poll=0.05, stall_check=0.05)
    thread, done = run_in_thread(worker)
    yield worker
    worker.stop.set()
    feed.wakeups.wake()
    thread.join(DEADLINE)
    assert not thread.is_alive(), "the worker did not stop"
    done.result()


@pytest.mark.django_db(transaction=True)
def test_the_worker_announces_a_session_that_stalls_while_it_runs(workspace, make_session, worker):
    session = make_session("stuck")
    agents.heartbeat_session(workspace=workspace, session_id=session.pk)
    set_back(session)
    wait_until(lambda: len(stalled_events(session)) == 1, "the first stall announced")
    agents.heartbeat_session(workspace=workspace, session_id=session.pk)  # still stalled
    other = make_session("other")
    set_back(other)
    wait_until(lambda: len(stalled_events(other)) == 1, "the second stall announced")
    assert len(stalled_events(session)) == 1
