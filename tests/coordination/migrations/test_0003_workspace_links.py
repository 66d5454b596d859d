"""No link crosses a workspace (invariant 9): refused by the admin forms, by the API,
and by the database itself (migration 0003), on SQLite and on PostgreSQL.

The links: issue.worktree, issue.project, issue.assignee, agent.worktree and
project.primary_worktree; and the other side, a linked worktree, project or agent
moving to another workspace.
"""

import importlib
import threading
import time

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, connections, transaction
from django.urls import reverse
from django.utils import timezone

from coordination.models import Agent, AgentSession, Issue, Project, Workspace, Worktree
from tests.api_helpers import V1, assert_error, post

pytestmark = pytest.mark.django_db

links_migration = importlib.import_module("coordination.migrations.0003_workspace_links")


@pytest.fixture
def ours(workspace):
    return Worktree.objects.create(workspace=workspace, slug="main", name="Main")


@pytest.fixture
def theirs(other_workspace):
    # The same slug as ours: lookups by slug must stay inside the caller's workspace.
    return Worktree.objects.create(workspace=other_workspace, slug="main", name="Their main")


@pytest.fixture
def their_only(other_workspace):
    """A slug that exists only in the other workspace."""
    return Worktree.objects.create(workspace=other_workspace, slug="elsewhere", name="Elsewhere")


@pytest.fixture
def agent(workspace):
    return Agent.objects.create(workspace=workspace, name="coder-1", role="Engineer")


@pytest.fixture
def their_agent(other_workspace):
    return Agent.objects.create(workspace=other_workspace, name="spy", role="Engineer")


@pytest.fixture
def their_project(other_workspace):
    return Project.objects.create(workspace=other_workspace, key="theirs", name="Theirs")


def snapshot(obj, *fields):
    obj = type(obj).objects.get(pk=obj.pk)
    return {field: getattr(obj, f"{field}_id") for field in fields}


# --- the API -------------------------------------------------------------------------


def test_patch_project_primary_worktree_of_another_workspace_is_400(api, project, their_only):
    response = api.patch(
        f"{V1}/projects/{project.pk}/", {"primary_worktree": "elsewhere"}, format="json"
    )
    body = assert_error(response, 400, "invalid")
    assert body["field"] == "primary_worktree" and "elsewhere" in body["detail"]
    assert Project.objects.get(pk=project.pk).primary_worktree_id is None


def test_create_project_with_a_primary_worktree_of_another_workspace_is_400(api, their_only):
    body = assert_error(
        post(api, "/projects/", {"key": "web", "name": "Web", "primary_worktree": "elsewhere"}),
        400,
        "invalid",
    )
    assert body["field"] == "primary_worktree"
    assert not Project.objects.filter(key="web").exists()


@pytest.mark.parametrize(
    ("field", "value"), [("worktree", "elsewhere"), ("assignee", "spy"), ("project", "theirs")]
)
def test_patch_issue_link_to_another_workspace_is_400(
    api, issue, their_only, their_agent, their_project, field, value
):
    before = snapshot(issue, "project", "worktree", "assignee")
    response = api.patch(f"{V1}/issues/{issue.pk}/", {field: value}, format="json")
    body = assert_error(response, 400, "invalid")
    assert body.get("field") == field or field in body.get("errors", {})
    assert snapshot(issue, "project", "worktree", "assignee") == before


@pytest.mark.parametrize(
    ("field", "value"), [("worktree", "elsewhere"), ("assignee", "spy"), ("project", "theirs")]
)
def test_create_issue_linked_to_another_workspace_is_400(
    api, project, their_only, their_agent, their_project, field, value
):
    body = {"project": "core", "title": "T", "description": "D", field: value}
    error = assert_error(post(api, "/issues/", body), 400, "invalid")
    assert error["field"] == field
    assert not Issue.objects.exists()


def test_register_with_a_worktree_of_another_workspace_is_400(api, their_only):
    body = assert_error(
        post(api, "/sessions/", {"agent": "coder-1", "worktree": "elsewhere"}), 400, "invalid"
    )
    assert body["field"] == "worktree"
    assert not Agent.objects.filter(name="coder-1").exists()
    assert not AgentSession.objects.exists()


def test_reregister_with_a_worktree_of_another_workspace_keeps_the_binding(
    api, agent, ours, their_only
):
    Agent.objects.filter(pk=agent.pk).update(worktree=ours)
    response = post(api, "/sessions/", {"agent": "coder-1", "worktree": "elsewhere"})
    assert assert_error(response, 400, "invalid")["field"] == "worktree"
    assert Agent.objects.get(pk=agent.pk).worktree_id == ours.pk
    assert not AgentSession.objects.exists()


def test_a_slug_of_both_workspaces_resolves_to_ours(api, project, issue, ours, theirs):
    assert post(api, "/sessions/", {"agent": "coder-1", "worktree": "main"}).status_code == 201
    patched = api.patch(f"{V1}/projects/{project.pk}/", {"primary_worktree": "main"}, format="json")
    assert patched.status_code == 200
    response = api.patch(f"{V1}/issues/{issue.pk}/", {"worktree": "main"}, format="json")
    assert response.status_code == 200 and response.json()["worktree"] == "main"
    assert Agent.objects.get(name="coder-1").worktree_id == ours.pk
    assert Project.objects.get(pk=project.pk).primary_worktree_id == ours.pk
    assert Issue.objects.get(pk=issue.pk).worktree_id == ours.pk


# --- the admin -----------------------------------------------------------------------


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("ops", password="pw-ops-123")
    client.force_login(user)
    return client


def admin_url(model, action, *args):
    return reverse(f"admin:coordination_{model._meta.model_name}_{action}", args=args)


# Sent with every admin POST: harmless where the admin shows no such field.


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


class Editor:
    """Enough of a schema editor for the migration's functions, inside a test
    transaction (SQLite's real one refuses to open inside a transaction)."""

    def __init__(self):
        self.connection = connection

    def execute(self, sql, params=None):
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


def test_migration_clears_nullable_cross_links_and_refuses_a_foreign_project(
    capsys, linked, workspace, project, agent, their_only, their_agent, their_project
):
    editor = Editor()
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


# --- races (PostgreSQL) ----------------------------------------------------------------


def _race(first, second):
    """Run ``first`` in a transaction that stays open a moment after its write, and
    ``second`` as soon as that write is done. Return what each raised (or None)."""
    written = threading.Event()
    results = [None, None]

    def run_first():
        try:
            with transaction.atomic():
                first()
                written.set()
                time.sleep(0.5)
        except Exception as error:  # noqa: BLE001 - the test inspects it
            results[0] = error
        finally:
            written.set()
            connections.close_all()

    def run_second():
        written.wait()
        try:
            with transaction.atomic():
                second()
        except Exception as error:  # noqa: BLE001 - the test inspects it
            results[1] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run_first), threading.Thread(target=run_second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_link_and_a_concurrent_move_of_its_target_cannot_both_commit(
    workspace, other_workspace, issue, ours
):
    def link():
        Issue.objects.filter(pk=issue.pk).update(worktree=ours)

    def move():
        Worktree.objects.filter(pk=ours.pk).update(workspace=other_workspace)

    linked_first = _race(link, move)
    assert linked_first[0] is None and isinstance(linked_first[1], IntegrityError)
    assert Issue.objects.get(pk=issue.pk).worktree_id == ours.pk

    Issue.objects.filter(pk=issue.pk).update(worktree=None)
    moved_first = _race(move, link)
    assert moved_first[0] is None and isinstance(moved_first[1], IntegrityError)
    assert Issue.objects.get(pk=issue.pk).worktree_id is None
    assert Worktree.objects.get(pk=ours.pk).workspace_id == other_workspace.pk
