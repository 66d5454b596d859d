"""The event buffer (invariant 12 (one event per change)): a change's events are written in its
transaction, with its commit, and dropped with a rollback; each workspace's events under its own
writer lock."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from coordination.db.sql import ADVISORY_LOCK_KEYS
from coordination.models import Event, EventType
from coordination.services import events
from tests.coordination.services.events_helpers import cursor, since, types_since

pytestmark = pytest.mark.django_db


# --- the buffer: written with the commit, dropped with a rollback ---------------------


def test_a_block_left_by_an_exception_drops_its_events_and_keeps_the_outer_ones(workspace, issue):
    mark = cursor()
    with events.change():
        events.record(workspace.pk, EventType.ISSUE_CREATED, issue_id=issue.pk)
        with pytest.raises(RuntimeError), events.change():
            events.record(workspace.pk, EventType.SESSION_ENDED)
            raise RuntimeError("the inner step failed")
        assert since(mark) == []  # nothing is written before the outermost block ends
    assert types_since(mark) == [EventType.ISSUE_CREATED]

    mark = cursor()
    with pytest.raises(RuntimeError), events.change():
        events.record(workspace.pk, EventType.ISSUE_CREATED, issue_id=issue.pk)
        raise RuntimeError("the whole change failed")
    with events.change():
        events.record(workspace.pk, EventType.ISSUE_CREATED, issue_id=issue.pk)
        transaction.set_rollback(True)
    assert since(mark) == []


def test_record_outside_a_change_is_refused(workspace):
    with pytest.raises(RuntimeError, match="outside events.change"):
        events.record(workspace.pk, EventType.ISSUE_CREATED)


def test_one_change_in_two_workspaces_writes_each_its_own(workspace, other_workspace):
    mark = cursor()
    with events.change():
        events.record(other_workspace.pk, EventType.ISSUE_CREATED)
        events.record(workspace.pk, EventType.SESSION_ENDED)
        events.record(other_workspace.pk, EventType.SESSION_ENDED)
    rows = Event.objects.filter(id__gt=mark).order_by("id")
    assert [(e.workspace_id, e.type) for e in rows if e.workspace_id == other_workspace.pk] == [
        (other_workspace.pk, EventType.ISSUE_CREATED),
        (other_workspace.pk, EventType.SESSION_ENDED),
    ]
    assert [e.type for e in rows if e.workspace_id == workspace.pk] == [EventType.SESSION_ENDED]


@pytest.mark.postgres
def test_the_insert_takes_each_workspaces_writer_lock_in_the_same_statement(
    workspace, other_workspace
):
    """docs/api.md "Events", the writers' half: the shared writer lock is held before
    any id is drawn, to the commit; one statement per workspace takes both."""
    namespace = ADVISORY_LOCK_KEYS["event_log"]
    with transaction.atomic(), CaptureQueriesContext(connection) as sent:
        with events.change():
            events.record(workspace.pk, EventType.ISSUE_CREATED)
            events.record(other_workspace.pk, EventType.ISSUE_CREATED)
        with connection.cursor() as held:
            held.execute(
                "SELECT classid::bigint, objid::bigint, mode FROM pg_locks"
                " WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND granted"
            )
            locks = set(held.fetchall())
    assert locks == {
        (namespace, workspace.pk, "ShareLock"),
        (namespace, other_workspace.pk, "ShareLock"),
    }
    inserts = [q["sql"] for q in sent.captured_queries if "pg_advisory_xact_lock" in q["sql"]]
    assert len(inserts) == 2
    assert all("INSERT INTO" in sql for sql in inserts)
