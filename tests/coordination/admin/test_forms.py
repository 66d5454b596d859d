"""No link crosses a workspace in the admin forms (invariant 9 (workspace isolation)): refused, or
not offered."""

import pytest

from coordination.models import Agent, Issue, Project
from tests.coordination.admin_helpers import url as admin_url

pytestmark = pytest.mark.django_db


def form_errors(response):
    assert response.status_code == 200, response.status_code  # the form again, not a redirect
    return response.context["adminform"].form.errors


def issue_data(workspace, project, **links):
    data = {
        "workspace": workspace.pk,
        "project": project.pk,
        "title": "T",
        "description": "D",
        "priority": 0,
    }
    data |= {name: value.pk for name, value in links.items()}
    return data


@pytest.mark.parametrize("field", ["worktree", "assignee", "project"])
def test_admin_add_issue_linked_to_another_workspace_is_refused(
    operator, workspace, project, their_only, their_agent, their_project, field
):
    target = {"worktree": their_only, "assignee": their_agent, "project": their_project}[field]
    data = issue_data(workspace, project) | {field: target.pk}

    errors = form_errors(operator.post(admin_url(Issue, "add"), data))

    assert list(errors) == [field]
    assert "belongs to workspace “globex”, not to “acme”" in errors[field][0]
    assert not Issue.objects.exists()


def test_admin_change_issue_to_a_worktree_of_another_workspace_is_refused(
    operator, workspace, project, issue, their_only
):
    data = issue_data(workspace, project, worktree=their_only)

    errors = form_errors(operator.post(admin_url(Issue, "change", issue.pk), data))

    assert "workspace “acme”" in errors["worktree"][0]
    assert Issue.objects.get(pk=issue.pk).worktree_id is None


def test_admin_add_agent_with_a_worktree_of_another_workspace_is_refused(
    operator, workspace, their_only
):
    data = {"workspace": workspace.pk, "name": "coder-9", "worktree": their_only.pk}

    errors = form_errors(operator.post(admin_url(Agent, "add"), data))

    assert "belongs to workspace “globex”" in errors["worktree"][0]
    assert not Agent.objects.filter(name="coder-9").exists()


def test_admin_change_agent_to_a_worktree_of_another_workspace_is_refused(
    operator, workspace, agent, their_only
):
    data = {"workspace": workspace.pk, "name": agent.name, "worktree": their_only.pk}

    errors = form_errors(operator.post(admin_url(Agent, "change", agent.pk), data))

    assert "worktree" in errors
    assert Agent.objects.get(pk=agent.pk).worktree_id is None


def test_admin_add_project_with_a_primary_worktree_of_another_workspace_is_refused(
    operator, workspace, their_only
):
    data = {
        "workspace": workspace.pk,
        "key": "web",
        "name": "Web",
        "agent_wip_limit": 3,
        "primary_worktree": their_only.pk,
    }

    errors = form_errors(operator.post(admin_url(Project, "add"), data))

    assert "belongs to workspace “globex”" in errors["primary_worktree"][0]
    assert not Project.objects.filter(key="web").exists()


def test_admin_change_project_to_a_primary_worktree_of_another_workspace_is_refused(
    operator, workspace, project, their_only
):
    data = {
        "workspace": workspace.pk,
        "key": project.key,
        "name": project.name,
        "agent_wip_limit": 3,
        "primary_worktree": their_only.pk,
    }

    errors = form_errors(operator.post(admin_url(Project, "change", project.pk), data))

    assert "primary_worktree" in errors
    assert Project.objects.get(pk=project.pk).primary_worktree_id is None


def test_admin_change_form_offers_only_the_workspaces_rows(
    operator, issue, ours, theirs, agent, their_agent, their_project
):
    form = operator.get(admin_url(Issue, "change", issue.pk)).context["adminform"].form

    assert list(form.fields["worktree"].queryset) == [ours]
    assert list(form.fields["assignee"].queryset) == [agent]
    assert list(form.fields["project"].queryset) == [issue.project]
    assert form.fields["workspace"].disabled


def test_admin_add_form_names_the_workspace_of_each_choice(operator, ours, theirs):
    page = operator.get(admin_url(Agent, "add")).content.decode()
    assert "acme / main" in page and "globex / main" in page


def test_admin_add_form_for_a_known_workspace_offers_only_its_rows(
    operator, workspace, ours, theirs
):
    response = operator.get(admin_url(Agent, "add") + f"?workspace={workspace.pk}")
    assert list(response.context["adminform"].form.fields["worktree"].queryset) == [ours]


def test_admin_cannot_move_an_existing_row_to_another_workspace(operator, agent, other_workspace):
    data = {"workspace": other_workspace.pk, "name": agent.name}

    response = operator.post(admin_url(Agent, "change", agent.pk), data)

    assert response.status_code == 302
    assert Agent.objects.get(pk=agent.pk).workspace_id == agent.workspace_id


def test_admin_links_within_the_workspace_are_saved(operator, workspace, project, agent, ours):
    data = issue_data(workspace, project, worktree=ours, assignee=agent)
    assert operator.post(admin_url(Issue, "add"), data).status_code == 302
    created = Issue.objects.get(title="T")
    assert (created.worktree_id, created.assignee_id) == (ours.pk, agent.pk)
