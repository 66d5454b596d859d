"""The tracker's admin: rows that state points at are kept, status moves by the
workflow's actions, keys are revoked and shown once."""

import pytest
from django.contrib import admin

from coordination import models as m
from coordination.models import ApiKey, Issue, Worktree
from tests.coordination.admin_helpers import act, bar, populate, url

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", [m.Project, Issue, m.Agent, Worktree], ids=lambda m: m.__name__)
def test_rows_that_state_points_at_cannot_be_deleted(operator, workspace, model):
    populate(workspace, 1)
    row = model._default_manager.order_by("pk").first()
    assert operator.post(url(model, "delete", row.pk), {"post": "yes"}).status_code == 403
    assert model._default_manager.filter(pk=row.pk).exists()


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


def test_revoking_keys_reports_each_and_an_added_key_is_shown_once(operator, workspace):
    response = operator.post(
        url(ApiKey, "add"), {"workspace": workspace.pk, "name": "ci"}, follow=True
    )
    shown = [text for text in bar(response) if "shown once" in text]
    assert len(shown) == 1 and ApiKey.PREFIX in shown[0]
    key = ApiKey.objects.get()
    revoked = act(operator, ApiKey, "revoke", [key])
    assert ApiKey.objects.get().revoked_at is not None
    assert any("Revoked 1" in text for text in bar(revoked))
    assert any("already revoked" in text for text in bar(act(operator, ApiKey, "revoke", [key])))
