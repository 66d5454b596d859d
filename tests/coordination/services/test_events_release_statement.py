"""PostgreSQL: a release of files outside any change writes its events in the release's
own statement (``sql.release_claims_announced``), with no transaction around it. What
it writes is what the buffered path (``events.change()`` around ``release_claims``)
writes, row for row; it takes the workspace's event-writer lock as every event write
does; and a release that finds nothing writes nothing and takes no lock."""

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from coordination.db.sql import ADVISORY_LOCK_KEYS
from coordination.models import Event, ReleaseReason
from coordination.services import events, file_claims
from tests.coordination.services.events_helpers import cursor

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

PATHS = {"first": ["src/b.py", "src/a.py", "src/Z.py"], "second": ["docs/é.md", "docs/e.md"]}


def held_by_two_sessions_and_none(workspace, issue, make_session) -> list[Any]:
    sessions = [make_session("coder-1"), make_session("coder-2")]
    for session, paths in zip(sessions, PATHS.values(), strict=True):
        file_claims.claim_files(
            workspace=workspace, issue_id=issue.pk, paths=paths, session_id=session.pk
        )
    file_claims.claim_files(workspace=workspace, issue_id=issue.pk, paths=["no-session.txt"])
    return sessions


def written_since(mark: int) -> list[tuple[Any, ...]]:
    rows = Event.objects.filter(pk__gt=mark).order_by("pk")
    return [
        (e.workspace_id, e.type, e.project_id, e.issue_id, e.session_id, e.agent_id, e.data)
        for e in rows
    ]


def buffered_release(workspace, issue) -> list[str]:
    with events.change():
        return file_claims.release_claims(
            reason=ReleaseReason.RELEASED, workspace_id=workspace.pk, issue_id=issue.pk
        )


def test_one_statement_writes_what_the_buffered_release_writes(workspace, issue, make_session):
    held_by_two_sessions_and_none(workspace, issue, make_session)
    mark = cursor()
    with transaction.atomic():
        buffered = buffered_release(workspace, issue)
        by_buffer = written_since(mark)
        transaction.set_rollback(True)
    assert len(by_buffer) == 3  # one per holder: two sessions and the session-less claim

    with CaptureQueriesContext(connection) as sent:
        released = file_claims.release_files(workspace=workspace, issue_id=issue.pk)

    assert released == buffered == sorted(sum(PATHS.values(), ["no-session.txt"]))
    assert written_since(mark) == by_buffer
    assert len(sent.captured_queries) == 1
    assert sent.captured_queries[0]["sql"].startswith("WITH released")


@pytest.mark.django_db(transaction=True)  # the claims above commit, and their locks end
def test_it_takes_the_writer_lock_and_only_when_it_releases(workspace, issue, make_session):
    held_by_two_sessions_and_none(workspace, issue, make_session)
    namespace = ADVISORY_LOCK_KEYS["event_log"]

    def advisory_locks() -> set[tuple[int, int, str]]:
        with connection.cursor() as held:
            held.execute(
                "SELECT classid::bigint, objid::bigint, mode FROM pg_locks"
                " WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND granted"
                " AND classid::bigint = %s",
                [namespace],
            )
            return set(held.fetchall())

    with transaction.atomic():  # a transaction around it: the lock lasts to its end
        mark = cursor()
        nothing = file_claims.release_files(workspace=workspace, issue_id=issue.pk, paths=["x"])
        assert nothing == [] and written_since(mark) == []
        assert advisory_locks() == set()

        file_claims.release_files(workspace=workspace, issue_id=issue.pk)
        assert advisory_locks() == {(namespace, workspace.pk, "ShareLock")}
        transaction.set_rollback(True)
