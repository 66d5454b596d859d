"""No link crosses a workspace (invariant 9 (workspace isolation)), refused by the database itself
(migration 0003), on SQLite and on PostgreSQL; and the migration's repair of existing rows.

The links: issue.worktree, issue.project, issue.assignee, agent.worktree and
project.primary_worktree; and the other side, a linked worktree, project or agent
moving to another workspace.
"""

import importlib

import pytest
from django.apps import apps
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from coordination.models import Agent, Issue, Project, Workspace, Worktree
from tests.coordination.conftest import snapshot

pytestmark = pytest.mark.django_db

links_migration = importlib.import_module("coordination.migrations.0003_workspace_links")


# --- the database ----------------------------------------------------------------------


@pytest.fixture
def linked(workspace, project, agent, ours):
    """An issue, an agent and a project linked to our worktree (and agent, project)."""
    issue = Issue.objects.create(
        workspace=workspace, project=project, title="Linked", worktree=ours, assignee=agent
    )
    Agent.objects.filter(pk=agent.pk).update(worktree=ours)
    Project.objects.filter(pk=project.pk).update(primary_worktree=ours)
    return issue


def refused(guard):
    """The write must fail as an IntegrityError naming the guard."""
    return pytest.raises(IntegrityError, match=guard)


LINKS = [
    # (guard, model, field, fixture of the other workspace's row)
    ("issue_worktree_same_workspace", Issue, "worktree", "their_only"),
    ("issue_project_same_workspace", Issue, "project", "their_project"),
    ("issue_assignee_same_workspace", Issue, "assignee", "their_agent"),
    ("agent_worktree_same_workspace", Agent, "worktree", "their_only"),
    ("project_primary_worktree_same_workspace", Project, "primary_worktree", "their_only"),
]


def row_of(model, linked):
    return {Issue: linked, Agent: linked.assignee, Project: linked.project}[model]


@pytest.mark.parametrize(("guard", "model", "field", "foreign"), LINKS)
def test_a_raw_update_to_another_workspace_is_an_integrity_error(
    request, linked, guard, model, field, foreign
):
    row, target = row_of(model, linked), request.getfixturevalue(foreign)
    before = snapshot(row, field)

    with refused(guard), transaction.atomic():
        model.objects.filter(pk=row.pk).update(**{field: target})

    assert snapshot(row, field) == before


@pytest.mark.parametrize(("guard", "model", "field", "foreign"), LINKS)
def test_a_save_linking_another_workspace_is_an_integrity_error(
    request, linked, guard, model, field, foreign
):
    row = model.objects.get(pk=row_of(model, linked).pk)
    setattr(row, field, request.getfixturevalue(foreign))

    with refused(guard), transaction.atomic():
        row.save()


@pytest.mark.parametrize("model", [Issue, Agent, Project])
def test_a_linked_row_cannot_itself_move_to_another_workspace(linked, other_workspace, model):
    """Changing a row's workspace while it keeps its links is a cross link too."""
    row = row_of(model, linked)

    with refused("same_workspace"), transaction.atomic():
        model.objects.filter(pk=row.pk).update(workspace=other_workspace)

    assert model.objects.get(pk=row.pk).workspace_id == linked.workspace_id


def raw_insert(table, **values):
    columns = ", ".join(values)
    marks = ", ".join(["%s"] * len(values))
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(values.values()))


def raw_issue(workspace_id, project_id, **links):
    now = timezone.now()
    raw_insert(
        "coordination_issue",
        workspace_id=workspace_id,
        project_id=project_id,
        title="Raw",
        description="",
        status="backlog",
        requires_filesystem=False,
        created_at=now,
        updated_at=now,
        **links,
    )


def test_a_raw_sql_insert_of_an_issue_with_another_workspaces_worktree_is_refused(
    workspace, project, their_only
):
    with refused("issue_worktree_same_workspace"), transaction.atomic():
        raw_issue(workspace.pk, project.pk, worktree_id=their_only.pk)
    assert not Issue.objects.exists()


def test_a_raw_sql_insert_of_an_issue_in_another_workspaces_project_is_refused(
    workspace, their_project
):
    with refused("issue_project_same_workspace"), transaction.atomic():
        raw_issue(workspace.pk, their_project.pk)
    assert not Issue.objects.exists()


def test_a_raw_sql_insert_of_an_issue_assigned_to_another_workspaces_agent_is_refused(
    workspace, project, their_agent
):
    with refused("issue_assignee_same_workspace"), transaction.atomic():
        raw_issue(workspace.pk, project.pk, assignee_id=their_agent.pk)
    assert not Issue.objects.exists()


def test_raw_sql_inserts_of_cross_workspace_agents_and_projects_are_refused(workspace, their_only):
    common = {"workspace_id": workspace.pk, "created_at": timezone.now()}
    with refused("agent_worktree_same_workspace"), transaction.atomic():
        raw_insert(
            "coordination_agent",
            name="raw",
            role="",
            department="",
            worktree_id=their_only.pk,
            **common,
        )
    with refused("project_primary_worktree_same_workspace"), transaction.atomic():
        raw_insert(
            "coordination_project",
            key="raw",
            name="Raw",
            agent_wip_limit=3,
            primary_worktree_id=their_only.pk,
            **common,
        )
    assert not Agent.objects.filter(name="raw").exists()
    assert not Project.objects.filter(key="raw").exists()


def test_a_raw_sql_insert_within_the_workspace_passes(workspace, project, agent, ours):
    raw_issue(workspace.pk, project.pk, worktree_id=ours.pk, assignee_id=agent.pk)
    assert Issue.objects.get(title="Raw").worktree_id == ours.pk


def keep_only(linked, link):
    """Clear every nullable link of the fixture but ``link`` (issue.project stays)."""
    Issue.objects.filter(pk=linked.pk).update(
        **{field: None for field in ("worktree", "assignee") if f"issue.{field}" != link}
    )
    if link != "agent.worktree":
        Agent.objects.update(worktree=None)
    if link != "project.primary_worktree":
        Project.objects.update(primary_worktree=None)


@pytest.mark.parametrize(
    ("guard", "link", "target"),
    [
        ("issue_worktree_same_workspace_on_move", "issue.worktree", "worktree"),
        ("agent_worktree_same_workspace_on_move", "agent.worktree", "worktree"),
        ("project_primary_worktree_same_workspace_on_move", "project.primary_worktree", "worktree"),
        ("issue_project_same_workspace_on_move", "issue.project", "project"),
        ("issue_assignee_same_workspace_on_move", "issue.assignee", "assignee"),
    ],
)
def test_a_linked_row_cannot_be_moved_away_from_its_links(
    linked, other_workspace, guard, link, target
):
    keep_only(linked, link)
    moved = getattr(linked, target)

    with refused(guard), transaction.atomic():
        type(moved).objects.filter(pk=moved.pk).update(workspace=other_workspace)

    assert type(moved).objects.get(pk=moved.pk).workspace_id == linked.workspace_id


def test_an_unlinked_row_may_move_and_same_workspace_links_may_change(
    linked, ours, workspace, other_workspace, agent
):
    spare = Worktree.objects.create(workspace=workspace, slug="spare", name="Spare")
    Issue.objects.filter(pk=linked.pk).update(worktree=spare, assignee=None)
    Agent.objects.filter(pk=agent.pk).update(worktree=None)
    Project.objects.update(primary_worktree=spare)

    Worktree.objects.filter(pk=ours.pk).update(workspace=other_workspace)
    Agent.objects.filter(pk=agent.pk).update(workspace=other_workspace)

    assert Worktree.objects.get(pk=ours.pk).workspace_id == other_workspace.pk
    assert Issue.objects.get(pk=linked.pk).worktree_id == spare.pk


def test_deleting_a_worktree_still_nulls_its_links(linked, ours, agent, project):
    ours.delete()

    assert Issue.objects.get(pk=linked.pk).worktree_id is None
    assert Agent.objects.get(pk=agent.pk).worktree_id is None
    assert Project.objects.get(pk=project.pk).primary_worktree_id is None


def test_deleting_an_agent_still_nulls_the_assignee(linked, agent):
    agent.delete()
    assert Issue.objects.get(pk=linked.pk).assignee_id is None


def test_deleting_a_workspace_deletes_its_linked_rows(linked, workspace, other_workspace):
    workspace.delete()
    assert not Issue.objects.exists() and not Worktree.objects.filter(slug="main").exists()
    assert Workspace.objects.get() == other_workspace


def test_an_unchanged_link_does_not_recheck(linked):
    """An update that leaves both the link and the workspace alone writes freely."""
    Issue.objects.filter(pk=linked.pk).update(title="Renamed", worktree=linked.worktree)
    assert Issue.objects.get(pk=linked.pk).title == "Renamed"


# --- the migration's handling of existing rows ---------------------------------------


def test_migration_clears_nullable_cross_links_and_refuses_a_foreign_project(
    capsys, linked, workspace, project, agent, their_only, their_agent, their_project, editor
):
    links_migration.remove_guards(apps, editor)
    try:
        Issue.objects.filter(pk=linked.pk).update(worktree=their_only, assignee=their_agent)
        Agent.objects.filter(pk=agent.pk).update(worktree=their_only)
        Project.objects.filter(pk=project.pk).update(primary_worktree=their_only)

        links_migration.repair_existing_links(apps, editor)

        assert snapshot(linked, "worktree", "assignee") == {"worktree": None, "assignee": None}
        assert Agent.objects.get(pk=agent.pk).worktree_id is None
        assert Project.objects.get(pk=project.pk).primary_worktree_id is None
        assert "cleared Issue.worktree of 1 row(s)" in capsys.readouterr().out

        Issue.objects.filter(pk=linked.pk).update(project=their_project)
        with pytest.raises(CommandError, match=rf"\[{linked.pk}\]"):
            links_migration.repair_existing_links(apps, editor)
    finally:
        Issue.objects.filter(pk=linked.pk).delete()
        links_migration.install_guards(apps, editor)

    with refused("agent_worktree_same_workspace"), transaction.atomic():
        Agent.objects.filter(pk=agent.pk).update(worktree=their_only)
