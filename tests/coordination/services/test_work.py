"""start_work and finish_work: the unit of work's assignee, status and rollback."""

import pytest

from coordination.errors import FileConflict, LeaseHeld
from coordination.models import Issue
from coordination.services import file_claims, work

pytestmark = pytest.mark.django_db

REPORT = {"summary": "Fixed.", "verification": "Tests pass."}


def start(workspace, issue, agent="erin", **kwargs):
    return work.start_work(workspace=workspace, agent_name=agent, issue_id=issue.pk, **kwargs)


def test_a_started_todo_issue_is_in_progress_and_assigned_to_its_agent(workspace, make_issue):
    issue = make_issue(status="todo")
    started = start(workspace, issue, paths=["src/login.py"])
    issue.refresh_from_db()
    assert (issue.status, issue.assignee) == ("in_progress", started.session.agent)

    work.finish_work(
        workspace=workspace, session_id=started.session.pk, issue_id=issue.pk, report=REPORT
    )
    issue.refresh_from_db()
    assert (issue.status, issue.assignee.name) == ("in_review", "erin")


def test_start_work_never_replaces_the_assignee(workspace, make_issue, agent):
    issue = make_issue(status="in_progress", assignee=agent)
    start(workspace, issue)
    issue.refresh_from_db()
    assert issue.assignee == agent


def test_a_refused_start_assigns_nobody(workspace, make_issue, make_session):
    issue, other = make_issue(status="todo"), make_issue(title="Other")
    holder = make_session("holder")
    file_claims.claim_files(
        workspace=workspace, issue_id=other.pk, paths=["src/a.py"], session_id=holder.pk
    )
    with pytest.raises(FileConflict):
        start(workspace, issue, paths=["src/a.py"])  # after its lease: rolled back
    start(workspace, other, agent="holder")
    with pytest.raises(LeaseHeld):
        start(workspace, other, agent="late")
    assert Issue.objects.get(pk=issue.pk).assignee is None
    assert Issue.objects.get(pk=other.pk).assignee.name == "holder"
