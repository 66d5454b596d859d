"""The tracker's admin: rows that state points at are kept, keys are revoked and shown
once (issues: test_issues)."""

import pytest

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


def test_an_issue_and_a_message_added_here_are_announced(operator, workspace, project):
    added = operator.post(
        url(Issue, "add"),
        {
            "workspace": workspace.pk,
            "project": project.pk,
            "title": "Filed by a person",
            "description": "",
            "status": "backlog",
            "priority": 0,
        },
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    issue = Issue.objects.get(title="Filed by a person")
    posted = operator.post(
        url(m.Message, "add"),
        {"workspace": workspace.pk, "scope": f"issue:{issue.pk}", "body": "Noted."},
    )
    assert posted.status_code == 302, posted.content.decode()[:2000]
    message = m.Message.objects.get()
    assert [(e.type, e.project_id, e.issue_id, e.data) for e in m.Event.objects.order_by("pk")] == [
        ("issue.created", project.pk, issue.pk, {}),
        ("message.posted", project.pk, issue.pk, {"message": message.pk, "scope": message.scope}),
    ]
