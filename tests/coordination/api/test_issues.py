"""REST API of projects, issues, the workflow, leases and WIP-cap denials
(``coordination/api/issues.py``): statuses, errors, filters, isolation, fences."""

import pytest
from rest_framework.test import APIClient

from coordination.models import (
    Issue,
    Project,
    Worktree,
)
from coordination.services import leases
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire

pytestmark = pytest.mark.django_db


# --- projects --------------------------------------------------------------------


def test_create_and_patch_project(api, workspace):
    Worktree.objects.create(workspace=workspace, slug="main", name="Main")
    created = post(api, "/projects/", {"key": "web", "name": "Web"})
    assert created.status_code == 201 and created.json()["agent_wip_limit"] == 3
    pk = created.json()["id"]
    patched = api.patch(
        f"{V1}/projects/{pk}/", {"agent_wip_limit": 5, "primary_worktree": "main"}, format="json"
    )
    assert patched.status_code == 200
    project = Project.objects.get(pk=pk)
    assert project.agent_wip_limit == 5 and project.primary_worktree.slug == "main"
    assert api.get(f"{V1}/projects/{pk}/").json()["primary_worktree"] == "main"


@pytest.mark.parametrize(
    "body",
    [
        {"key": "web"},
        {"key": "we b", "name": "x"},
        {"key": "web", "name": "x", "agent_wip_limit": 0},
        {"key": "web", "name": "x", "agent_wip_limit": "many"},
        {"key": "web", "name": "x", "primary_worktree": "nope"},
    ],
)
def test_create_project_bad_input_is_400(api, body):
    assert_error(post(api, "/projects/", body), 400, "invalid")
    assert not Project.objects.exists()


def test_duplicate_project_key_is_400(api, project):
    assert_error(post(api, "/projects/", {"key": "core", "name": "Again"}), 400, "invalid")


def test_patch_unknown_project_is_404(api, workspace):
    assert_error(api.patch(f"{V1}/projects/999/", {"name": "x"}, format="json"), 404, "not_found")


def test_put_is_not_allowed(api, project):
    response = api.put(f"{V1}/projects/{project.pk}/", {"name": "x"}, format="json")
    assert_error(response, 405, "method_not_allowed")


# --- issues and workflow -----------------------------------------------------------


def test_create_issue(api, workspace, project, make_session):
    make_session("coder-1")
    Worktree.objects.create(workspace=workspace, slug="main", name="Main")
    response = post(
        api,
        "/issues/",
        {
            "project": "core",
            "title": "T",
            "description": "D",
            "requires_filesystem": True,
            "worktree": "main",
            "assignee": "coder-1",
        },
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["project"], body["status"], body["worktree"], body["assignee"]) == (
        "core",
        "backlog",
        "main",
        "coder-1",
    )
    assert body["lease"] is None and body["requires_filesystem"] is True


@pytest.mark.parametrize(
    "body",
    [
        {"project": "core"},
        {"project": "nope", "title": "T"},
        {"project": "core", "title": "T", "requires_filesystem": "yes"},
        {"project": "core", "title": "T", "assignee": "ghost"},
        {"project": "core", "title": "T", "status": "flying"},
        {"project": "core", "title": "T", "status": "done"},
        {"project": "core", "title": "T\x00"},
    ],
)
def test_create_issue_bad_input_is_4xx(api, project, body):
    response = post(api, "/issues/", body)
    assert response.status_code in (400, 409), response.content
    assert response.json()["code"] in ("invalid", "invalid_transition")
    assert not Issue.objects.exists()


def test_patch_issue_edits_fields_but_not_status(api, issue):
    ok = api.patch(f"{V1}/issues/{issue.pk}/", {"title": "New"}, format="json")
    assert ok.status_code == 200 and ok.json()["title"] == "New"
    body = assert_error(
        api.patch(f"{V1}/issues/{issue.pk}/", {"status": "done"}, format="json"), 400, "invalid"
    )
    assert "status" in body["errors"]
    assert Issue.objects.get(pk=issue.pk).status == "backlog"


def test_a_person_reassigns_or_unassigns_an_issue_an_agent_took(
    alice, workspace, issue, agent, make_session
):
    """The agent's claim assigned it; the assignee stays a person's to change."""
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=make_session("erin").pk)
    client = APIClient()
    client.force_login(alice)
    url, headers = f"{V1}/issues/{issue.pk}/", {"X-Projektor-Workspace": "acme"}
    assert client.get(url, headers=headers).json()["assignee"] == "erin"
    moved = client.patch(url, {"assignee": agent.name}, format="json", headers=headers)
    assert moved.status_code == 200 and moved.json()["assignee"] == agent.name
    cleared = client.patch(url, {"assignee": None}, format="json", headers=headers)
    assert cleared.status_code == 200 and cleared.json()["assignee"] is None
    assert Issue.objects.get(pk=issue.pk).assignee is None


def test_transition_via_api(api, issue):
    response = post(api, f"/issues/{issue.pk}/transition/", {"to": "todo"})
    assert response.status_code == 200 and response.json()["status"] == "todo"
    assert_error(
        post(api, f"/issues/{issue.pk}/transition/", {"to": "done"}), 409, "invalid_transition"
    )
    assert_error(post(api, f"/issues/{issue.pk}/transition/", {"to": "sideways"}), 400, "invalid")
    assert_error(post(api, "/issues/999/transition/", {"to": "todo"}), 404, "not_found")


def test_transition_to_todo_names_what_is_missing(api, make_issue):
    issue = make_issue(description="")
    body = assert_error(
        post(api, f"/issues/{issue.pk}/transition/", {"to": "todo"}), 409, "invalid_transition"
    )
    assert body["missing"] == ["description"]


def test_review_gate_refuses_an_api_key_with_403(api, make_issue):
    issue = make_issue(status="in_review")
    assert_error(post(api, f"/issues/{issue.pk}/transition/", {"to": "done"}), 403, "forbidden")
    assert Issue.objects.get(pk=issue.pk).status == "in_review"


def test_review_gate_lets_a_logged_in_member_pass(alice, make_issue):
    issue = make_issue(status="in_review")
    client = APIClient(enforce_csrf_checks=False)
    client.force_login(alice)
    response = client.post(
        f"{V1}/issues/{issue.pk}/transition/",
        {"to": "done"},
        format="json",
        headers={"X-Projektor-Workspace": "acme"},
    )
    assert response.status_code == 200 and response.json()["status"] == "done"


def test_workflow_endpoint(api):
    body = api.get(f"{V1}/workflow/").json()
    assert set(body) == {"states", "transitions", "definition_of_ready", "gates", "report"}
    assert body["report"]["required_for"] == ["done", "in_review"]


def test_issue_filters(api, make_issue, make_session):
    leased, _, dead = (
        make_issue(title="leased"),
        make_issue(title="free"),
        make_issue(title="dead"),
    )
    holder, crashed = make_session("holder"), make_session("crashed")
    post(api, f"/issues/{leased.pk}/claim/", {"session": holder.pk})
    post(api, f"/issues/{dead.pk}/claim/", {"session": crashed.pk})
    expire(crashed)

    def titles(query):
        return {row["title"] for row in api.get(f"{V1}/issues/{query}").json()["results"]}

    assert titles("?leased=true") == {"leased"}
    assert titles("?leased=false") == {"free", "dead"}
    assert titles("?project=core&status=backlog") == {"leased", "free", "dead"}
    assert_error(api.get(f"{V1}/issues/?status=flying"), 400, "invalid")
    dead_row = api.get(f"{V1}/issues/{dead.pk}/").json()
    assert dead_row["lease"]["session"] == crashed.pk and dead_row["lease"]["live"] is False
