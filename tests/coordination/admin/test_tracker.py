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


def test_an_agent_key_is_added_with_its_agent_force_and_expiry_and_listed_so(
    operator, workspace, other_workspace
):
    agent = m.Agent.objects.create(workspace=workspace, name="coder-1")
    theirs = m.Agent.objects.create(workspace=other_workspace, name="coder-9")
    add = url(ApiKey, "add")
    base = {"workspace": workspace.pk, "name": "coder-1's"}
    for body, field in (
        ({"kind": "agent"}, "agent"),  # an agent key names its agent
        ({"kind": "fleet", "agent": agent.pk}, "agent"),
        ({"kind": "agent", "agent": theirs.pk}, "agent"),  # of another workspace
        ({"kind": "read", "force": "yes"}, "force"),
    ):
        refused = operator.post(add, {**base, **body})
        assert refused.status_code == 200, body
        assert field in refused.context["adminform"].form.errors, body
    assert not ApiKey.objects.exists()
    added = operator.post(
        add,
        {
            **base,
            "kind": "agent",
            "agent": agent.pk,
            "force": "yes",
            "expires_at_0": "2999-01-01",
            "expires_at_1": "00:00:00",
        },
        follow=True,
    )
    assert any("shown once" in text for text in bar(added))
    key = ApiKey.objects.get()
    assert (key.kind, key.agent_id, key.can_force) == ("agent", agent.pk, True)
    assert key.expires_at is not None and key.expires_at.year == 2999
    operator.post(add, {"workspace": workspace.pk, "name": "dashboard", "kind": "read"})
    read = ApiKey.objects.get(name="dashboard")
    assert (read.kind, read.can_force) == ("read", False)
    listed = operator.get(url(ApiKey)).content.decode()
    for shown in ("coder-1", "agent", "read", "2999"):
        assert shown in listed, shown
    page = operator.get(url(ApiKey, "change", key.pk)).content.decode()
    assert "coder-1" in page and "agent" in page


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
        (  # the operator who added it: no agent signs it
            "message.posted",
            project.pk,
            issue.pk,
            {"message": message.pk, "scope": message.scope, "operator": "ops"},
        ),
    ]
