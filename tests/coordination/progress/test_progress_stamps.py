"""What stamps a session's progress (invariant 17 (stalled is derived)): every change it makes — a
claim, a release, a transition, a message, a run, a report, a link — in the change's own
transaction; a change that names no session stamps the holder of the issue's lease.
A heartbeat, a refused change and a rolled-back one stamp nothing (both databases)."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from coordination.models import AgentSession, Issue
from coordination.services import leases, messages
from tests.api_helpers import V1, post
from tests.coordination.conftest import claim_lease

pytestmark = pytest.mark.django_db

STALL_AFTER = 60
REPORT = {"summary": "Fixed the login flow.", "verification": "Ran the login tests."}


@pytest.fixture(autouse=True)
def _short_stall(settings):
    settings.PROJEKTOR_STALL_AFTER_SECONDS = STALL_AFTER


def set_back(session: AgentSession) -> None:
    """Move the session's last progress back past the stall threshold."""
    stamp = timezone.now() - timedelta(seconds=STALL_AFTER + 5)
    AgentSession.objects.filter(pk=session.pk).update(last_progress_at=stamp)


def progress_of(session: AgentSession):
    return AgentSession.objects.values_list("last_progress_at", flat=True).get(pk=session.pk)


def stamps(session: AgentSession, call) -> bool:
    """Whether ``call`` (a request that must succeed) moved the session's progress."""
    set_back(session)
    before = progress_of(session)
    response = call()
    assert response.status_code < 300, response.content
    return progress_of(session) > before


def stamps_nothing(session: AgentSession, call, status: int) -> bool:
    """Whether ``call``, refused with ``status``, left the session's progress as it was."""
    set_back(session)
    before = progress_of(session)
    response = call()
    assert response.status_code == status, response.content
    return progress_of(session) == before


@pytest.fixture
def holder(workspace, issue, make_session) -> AgentSession:
    session = make_session("holder")
    claim_lease(workspace, issue, session)
    return session


def test_a_run_dispatched_and_finished_is_progress(api, make_issue, make_session, tree):
    session = make_session()
    work = make_issue(worktree=tree)
    dispatched = {}

    def dispatch():
        response = post(api, "/runs/", {"session": session.pk, "issue": work.pk})
        dispatched.update(response.json())
        return response

    assert stamps(session, dispatch)
    assert dispatched["status"] == "running"
    finish = f"/runs/{dispatched['id']}/finish/"
    assert stamps(session, lambda: post(api, finish, {"outcome": "succeeded"}))


def test_a_report_is_progress_with_a_key_or_through_finish_work(
    api, workspace, make_issue, make_session
):
    session = make_session()
    reviewed = make_issue(status=Issue.Status.IN_PROGRESS)
    claim_lease(workspace, reviewed, session)
    # Given with the key, naming no session: the lease's holder made it.
    to_review = {"to": "in_review", "report": REPORT}
    assert stamps(session, lambda: post(api, f"/issues/{reviewed.pk}/transition/", to_review))

    finished = make_issue(status=Issue.Status.IN_PROGRESS)
    claim_lease(workspace, finished, session)
    body = {"session": session.pk, "issue": finished.pk, "report": REPORT}
    assert stamps(session, lambda: post(api, "/work/finish/", body))


def test_a_link_and_an_unlink_are_the_source_holders_progress(api, issue, holder, make_issue):
    target = make_issue(title="The login page")
    created = {}

    def link():
        response = post(api, f"/issues/{issue.pk}/links/", {"type": "blocks", "target": target.pk})
        created.update(response.json())
        return response

    assert stamps(holder, link)
    assert stamps(holder, lambda: api.delete(f"{V1}/issues/{issue.pk}/links/{created['id']}/"))


def test_file_claims_claimed_and_released_are_progress(api, issue, holder):
    paths = {"issue": issue.pk, "paths": ["src/login.py"], "session": holder.pk}
    assert stamps(holder, lambda: post(api, "/file-claims/", paths))
    assert stamps(holder, lambda: post(api, "/file-claims/release/", paths))


def test_a_heartbeat_of_a_holder_is_not_progress(api, holder):
    assert stamps_nothing(holder, lambda: post(api, f"/sessions/{holder.pk}/heartbeat/"), 200)


def test_refused_changes_stamp_nothing(api, workspace, issue, holder, make_issue, make_session):
    other = make_session("other")
    free = make_issue(title="Unleased")
    # Claiming what another holds; releasing what it does not hold.
    claim = {"session": other.pk}
    assert stamps_nothing(other, lambda: post(api, f"/issues/{issue.pk}/claim/", claim), 409)
    assert stamps_nothing(other, lambda: post(api, f"/issues/{free.pk}/release/", claim), 409)
    # A transition the workflow refuses (no report), a link to itself, a bad message.
    to_review = {"to": "in_review"}
    transition = f"/issues/{issue.pk}/transition/"
    assert stamps_nothing(holder, lambda: post(api, transition, to_review), 409)
    self_link = {"type": "blocks", "target": issue.pk}
    assert stamps_nothing(holder, lambda: post(api, f"/issues/{issue.pk}/links/", self_link), 400)
    bad = {"scope": f"issue:{issue.pk}", "body": "", "session": holder.pk}
    assert stamps_nothing(holder, lambda: post(api, "/messages/", bad), 400)
    # A fenced release with a fence that is not the lease's.
    stale = {"session": holder.pk, "fence": 7}
    assert stamps_nothing(holder, lambda: post(api, f"/issues/{issue.pk}/release/", stale), 409)


class RolledBack(Exception):
    pass


def test_the_stamp_is_in_the_changes_transaction(workspace, issue, make_session):
    session = make_session()
    set_back(session)
    before = progress_of(session)
    with pytest.raises(RolledBack), transaction.atomic():
        claim_lease(workspace, issue, session)
        messages.record_message(
            workspace=workspace, scope=f"issue:{issue.pk}", body="On it.", session=session
        )
        assert progress_of(session) > before  # seen inside the change's transaction
        raise RolledBack
    assert progress_of(session) == before
    assert leases.unreleased_lease(issue.pk) is None
