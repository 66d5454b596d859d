"""The workflow: every allowed and forbidden transition, the human gate, readiness."""

import itertools

import pytest

from coordination.errors import Forbidden, InvalidTransition
from coordination.models import FileClaim, Issue, IssueLease, ReleaseReason
from coordination.services import leases, projects, workflow

pytestmark = pytest.mark.django_db

STATES = [state.value for state in Issue.Status]
ALLOWED = {
    (source, target) for source, targets in workflow.TRANSITIONS.items() for target in targets
}


REPORT = {"summary": "Fixed the flow.", "verification": "Ran the login tests."}


def move(workspace, issue, to, *, by_human=False, report=None):
    return workflow.transition_issue(
        workspace=workspace, issue_id=issue.pk, to=to, by_human=by_human, report=report
    )


@pytest.mark.parametrize("source,target", sorted(ALLOWED))
def test_allowed_transition(workspace, make_issue, source, target):
    issue = make_issue(status=source)
    moved = move(workspace, issue, target, by_human=True)
    assert moved.status == target
    assert Issue.objects.get(pk=issue.pk).status == target


@pytest.mark.parametrize(
    "source,target",
    sorted(pair for pair in itertools.product(STATES, STATES) if pair not in ALLOWED),
)
def test_forbidden_transition(workspace, make_issue, source, target):
    issue = make_issue(status=source)
    with pytest.raises(InvalidTransition) as raised:
        move(workspace, issue, target, by_human=True)
    assert raised.value.extra["allowed"] == list(workflow.TRANSITIONS[source])
    assert Issue.objects.get(pk=issue.pk).status == source


def test_review_gate_refuses_an_agent(workspace, make_issue):
    issue = make_issue(status=Issue.Status.IN_REVIEW)
    with pytest.raises(Forbidden):
        move(workspace, issue, Issue.Status.DONE, by_human=False)
    assert Issue.objects.get(pk=issue.pk).status == Issue.Status.IN_REVIEW


def test_review_gate_lets_a_person_pass(workspace, make_issue):
    issue = make_issue(status=Issue.Status.IN_REVIEW)
    assert move(workspace, issue, Issue.Status.DONE, by_human=True).status == Issue.Status.DONE


def test_entering_todo_requires_the_definition_of_ready(workspace, make_issue):
    issue = make_issue(description="  ")
    with pytest.raises(InvalidTransition) as raised:
        move(workspace, issue, Issue.Status.TODO)
    assert raised.value.extra["missing"] == ["description"]
    assert Issue.objects.get(pk=issue.pk).status == Issue.Status.BACKLOG


def test_new_issue_starts_in_todo_only_when_ready(workspace, project):
    ready = projects.create_issue(
        workspace=workspace,
        fields={
            "project": "core",
            "title": "Ready",
            "description": "Done when green.",
            "status": "todo",
        },
    )
    assert ready.status == Issue.Status.TODO
    with pytest.raises(InvalidTransition):
        projects.create_issue(
            workspace=workspace, fields={"project": "core", "title": "Vague", "status": "todo"}
        )
    assert Issue.objects.count() == 1


@pytest.mark.parametrize("closing", [Issue.Status.DONE, Issue.Status.CANCELLED])
def test_closing_releases_lease_and_file_claims(workspace, make_issue, make_session, closing):
    issue = make_issue(status=Issue.Status.IN_REVIEW)
    session = make_session()
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    FileClaim.objects.create(workspace=workspace, issue=issue, session=session, path="src/a.py")

    move(workspace, issue, closing, by_human=True, report=REPORT)

    assert IssueLease.objects.get().release_reason == ReleaseReason.ISSUE_CLOSED
    assert FileClaim.objects.get().release_reason == ReleaseReason.ISSUE_CLOSED


def test_get_workflow_describes_the_same_rules():
    described = workflow.get_workflow()
    assert described["states"] == STATES
    pairs = {(t["from"], t["to"]) for t in described["transitions"]}
    assert pairs == ALLOWED
    assert described["gates"] == [{"from": "in_review", "to": "done", "requires": "human"}]
    assert [item["field"] for item in described["definition_of_ready"]] == ["title", "description"]


def test_an_edit_from_a_stale_copy_keeps_a_newer_status(workspace, make_issue):
    """PATCH reads the issue, a transition commits, then PATCH saves: only the
    edited fields are written, so the close is not undone."""
    issue = make_issue(status=Issue.Status.TODO)
    stale = Issue.objects.get(pk=issue.pk)
    move(workspace, issue, Issue.Status.CANCELLED)
    projects.update_issue(workspace=workspace, issue=stale, fields={"title": "Renamed"})
    issue.refresh_from_db()
    assert (issue.status, issue.title) == (Issue.Status.CANCELLED, "Renamed")


# --- completion reports ------------------------------------------------------------------


@pytest.mark.parametrize(
    "source,target",
    [
        (Issue.Status.IN_PROGRESS, Issue.Status.IN_REVIEW),
        (Issue.Status.IN_REVIEW, Issue.Status.DONE),
    ],
)
def test_worked_on_issue_needs_a_report_to_enter_review_or_done(
    workspace, make_issue, make_session, source, target
):
    issue = make_issue(status=source)
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=make_session().pk)
    with pytest.raises(InvalidTransition) as refused:
        move(workspace, issue, target, by_human=True)
    assert refused.value.extra["missing"] == ["report"]
    issue.refresh_from_db()
    assert issue.status == source and issue.report is None

    move(workspace, issue, target, by_human=True, report=REPORT)
    issue.refresh_from_db()
    assert (issue.status, issue.report) == (target, REPORT)


def test_a_recorded_report_carries_the_issue_on_to_done(workspace, make_issue, make_session):
    issue = make_issue(status=Issue.Status.IN_PROGRESS)
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=make_session().pk)
    move(workspace, issue, Issue.Status.IN_REVIEW, report=REPORT)
    move(workspace, issue, Issue.Status.DONE, by_human=True)  # the report is on record
    assert Issue.objects.get(pk=issue.pk).status == Issue.Status.DONE


def test_a_never_leased_issue_needs_no_report(workspace, make_issue):
    issue = make_issue(status=Issue.Status.IN_PROGRESS)
    move(workspace, issue, Issue.Status.IN_REVIEW)
    assert Issue.objects.get(pk=issue.pk).report is None


def test_the_report_is_posted_to_the_issue(workspace, make_issue, make_session):
    from coordination.models import Message

    issue = make_issue(status=Issue.Status.IN_PROGRESS)
    move(
        workspace,
        issue,
        Issue.Status.IN_REVIEW,
        report={**REPORT, "pr_link": "https://git.example.com/pr/7"},
    )
    body = Message.objects.get(scope=f"issue:{issue.pk}").body
    assert "Fixed the flow." in body and "Ran the login tests." in body
    assert "https://git.example.com/pr/7" in body
