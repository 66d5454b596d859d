"""Issues in the admin: who holds each, and a page that moves the issue through the
workflow, through the same service as the list's actions (the review gate passes,
every other rule holds)."""

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission

from coordination.models import FileClaim, Issue, IssueLease
from coordination.services import file_claims, leases, workflow
from tests.conftest import expire, password_of
from tests.coordination.admin_helpers import act, bar, url

pytestmark = pytest.mark.django_db


def transition_url(issue) -> str:
    return url(Issue, "transition", issue.pk)


def test_issue_status_moves_only_through_the_workflow(operator, issue):
    page = operator.get(url(Issue, "change", issue.pk)).content.decode()
    assert 'name="status"' not in page


def test_transition_actions_pass_the_review_gate_and_report_refusals(operator, make_issue):
    review = make_issue(status=Issue.Status.IN_REVIEW)
    backlog = make_issue(status=Issue.Status.BACKLOG)
    response = act(operator, Issue, "move_to_done", [review, backlog])
    review.refresh_from_db()
    backlog.refresh_from_db()
    assert (review.status, backlog.status) == ("done", "backlog")
    assert any(f"#{review.pk}" in text and "done" in text for text in bar(response))
    assert any(f"#{backlog.pk}: Cannot move" in text for text in bar(response))


def test_every_status_has_a_transition_action(operator):
    actions = admin.site._registry[Issue].get_actions(operator.get(url(Issue)).wsgi_request)
    assert {f"move_to_{status}" for status in Issue.Status} <= set(actions)


def test_the_list_shows_who_holds_each_issue(operator, workspace, make_issue, make_session):
    held, free = make_issue(title="Held"), make_issue(title="Free")
    session = make_session("coder-7")
    leases.claim_issue(workspace=workspace, issue_id=held.pk, session_id=session.pk)
    expire(session)
    rows = {row.pk: row for row in operator.get(url(Issue)).context["cl"].result_list}
    admin_of = admin.site._registry[Issue]
    assert f"coder-7 · session {session.pk}" in admin_of.holder(rows[held.pk])
    assert ">stale<" in admin_of.holder(rows[held.pk])
    assert admin_of.holder(rows[free.pk]) == "—"


def test_the_page_offers_each_move_the_workflow_allows(operator, make_issue):
    for status, targets in workflow.TRANSITIONS.items():
        page = operator.get(url(Issue, "change", make_issue(status=status).pk)).content.decode()
        offered = [target for target in Issue.Status if f'name="to" value="{target}"' in page]
        assert offered == [target for target in Issue.Status if target in targets], status
    review = operator.get(url(Issue, "change", make_issue(status="in_review").pk))
    assert "→ done (review gate)" in review.content.decode()


def test_a_button_moves_the_issue_as_the_actions_do(operator, workspace, make_issue, make_session):
    issue = make_issue(status=Issue.Status.IN_REVIEW)
    response = operator.post(transition_url(issue), {"to": "done"}, follow=True)
    assert response.redirect_chain == [(url(Issue, "change", issue.pk), 302)]
    assert Issue.objects.get(pk=issue.pk).status == "done"  # the review gate passes
    assert any(f"Moved to done 1: #{issue.pk}" in text for text in bar(response))

    leased = make_issue(status=Issue.Status.TODO)
    session = make_session()
    leases.claim_issue(workspace=workspace, issue_id=leased.pk, session_id=session.pk)
    file_claims.claim_files(
        workspace=workspace, issue_id=leased.pk, paths=["a.py"], session_id=session.pk
    )
    operator.post(transition_url(leased), {"to": "cancelled"})
    assert IssueLease.objects.get(issue=leased).release_reason == "issue_closed"
    assert FileClaim.objects.get(issue=leased).release_reason == "issue_closed"


def test_a_refused_move_says_why(operator, workspace, make_issue, make_session):
    todo = make_issue(status=Issue.Status.TODO)
    response = operator.post(transition_url(todo), {"to": "done"}, follow=True)
    assert any(f"#{todo.pk}: Cannot move an issue from todo to done" in t for t in bar(response))
    leases.claim_issue(workspace=workspace, issue_id=todo.pk, session_id=make_session().pk)
    workflow.transition_issue(
        workspace=workspace, issue_id=todo.pk, to="in_progress", by_human=False
    )
    response = operator.post(transition_url(todo), {"to": "in_review"}, follow=True)
    assert any("needs a completion report" in text for text in bar(response))
    assert Issue.objects.get(pk=todo.pk).status == "in_progress"
    response = operator.post(transition_url(todo), {"to": "nowhere"}, follow=True)
    assert any("Cannot move" in text for text in bar(response))


def test_moving_is_a_post_by_staff_who_may_change_issues(
    client, operator, issue, django_user_model
):
    assert operator.get(transition_url(issue)).status_code == 405
    assert operator.post(url(Issue, "transition", 10**6), {"to": "todo"}).status_code == 404
    viewer = django_user_model.objects.create_user(
        "viewer", password=password_of("viewer"), is_staff=True
    )
    viewer.user_permissions.add(Permission.objects.get(codename="view_issue"))
    client.force_login(viewer)
    assert client.post(transition_url(issue), {"to": "todo"}).status_code == 403
    client.logout()
    assert client.post(transition_url(issue), {"to": "todo"}).status_code == 302  # to log in
    assert Issue.objects.get(pk=issue.pk).status == issue.status


def test_the_page_shows_state_times_and_the_report_without_repeating_its_label(
    operator, workspace, make_issue, make_session
):
    issue = make_issue(status=Issue.Status.TODO)
    session = make_session("coder-7")
    lease = leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk).lease
    workflow.transition_issue(
        workspace=workspace, issue_id=issue.pk, to="in_progress", by_human=False
    )
    report = {"summary": "Fixed it.", "verification": "Tests.", "pr_link": "https://x.test/pr/1"}
    workflow.transition_issue(
        workspace=workspace, issue_id=issue.pk, to="in_review", by_human=False, report=report
    )
    page = operator.get(url(Issue, "change", issue.pk)).content.decode()
    assert f"coder-7 · session {session.pk}" in page and ">live<" in page
    assert f"lease {lease.pk}</a>, fence {lease.fence}" in page
    for label in ("Created:", "Updated:", "Summary:", "Verification:", "Pull request:"):
        assert label in page
    assert '<div class="readonly">Fixed it.</div>' in page
    assert '<a href="https://x.test/pr/1" rel="noopener noreferrer">' in page
    assert "Completion report:" not in page  # the fieldset is the only label
