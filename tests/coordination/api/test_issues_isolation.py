"""REST API of projects and issues across workspaces (invariant 9 (workspace isolation)): another
workspace's key sees and changes nothing, and a link to another workspace's row is a
400."""

import pytest

from coordination.models import (
    Agent,
    AgentSession,
    Issue,
    IssueLease,
    Project,
)
from coordination.services import leases
from tests.api_helpers import V1, assert_error, post
from tests.coordination.conftest import snapshot

pytestmark = pytest.mark.django_db


# --- workspace isolation (invariant 9 (workspace isolation))
# --------------------------------------------


def test_another_workspaces_key_sees_and_changes_nothing(
    stranger_api, workspace, project, issue, make_session
):
    session = make_session()
    lease_id = leases.claim_issue(
        workspace=workspace, issue_id=issue.pk, session_id=session.pk
    ).lease.pk

    for url in (
        f"/issues/{issue.pk}/",
        f"/projects/{project.pk}/",
        f"/sessions/{session.pk}/",
        f"/leases/{lease_id}/",
    ):
        assert_error(stranger_api.get(f"{V1}{url}"), 404, "not_found")
    for url, body in (
        (f"/issues/{issue.pk}/claim/", {"session": session.pk}),
        (f"/issues/{issue.pk}/release/", {"session": session.pk}),
        (f"/issues/{issue.pk}/transition/", {"to": "cancelled"}),
        (f"/sessions/{session.pk}/heartbeat/", None),
        (f"/sessions/{session.pk}/end/", None),
    ):
        assert_error(post(stranger_api, url, body), 404, "not_found")
    assert_error(
        stranger_api.patch(f"{V1}/issues/{issue.pk}/", {"title": "x"}, format="json"),
        404,
        "not_found",
    )
    for listing in ("/issues/", "/projects/", "/sessions/", "/leases/", "/wip-cap-denials/"):
        assert stranger_api.get(f"{V1}{listing}").json()["count"] == 0

    issue.refresh_from_db()
    assert issue.status == "backlog" and issue.title == "Fix the login flow"
    assert IssueLease.objects.live().get().session_id == session.pk
    assert AgentSession.objects.get(pk=session.pk).status == "active"


def test_a_session_of_another_workspace_cannot_claim_here(
    api, stranger_api, issue, other_workspace, make_session
):
    foreign = make_session("spy", workspace=other_workspace)
    assert_error(post(api, f"/issues/{issue.pk}/claim/", {"session": foreign.pk}), 400, "invalid")
    assert not IssueLease.objects.exists()


def test_listing_issues_takes_a_fixed_number_of_queries(
    api, make_issue, make_session, django_assert_max_num_queries
):
    """No N+1: the lease of every issue comes from one prefetch."""
    session = make_session()
    for _ in range(3):
        post(api, f"/issues/{make_issue().pk}/claim/", {"session": session.pk})
    for _ in range(10):
        make_issue()
    with django_assert_max_num_queries(5):
        response = api.get(f"{V1}/issues/")
    assert response.json()["count"] == 13


# --- links to another workspace (invariant 9 (workspace isolation))
# -----------------------------------------


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


def test_a_slug_of_both_workspaces_resolves_to_ours(api, project, issue, ours, theirs):
    assert post(api, "/sessions/", {"agent": "coder-1", "worktree": "main"}).status_code == 201
    patched = api.patch(f"{V1}/projects/{project.pk}/", {"primary_worktree": "main"}, format="json")
    assert patched.status_code == 200
    response = api.patch(f"{V1}/issues/{issue.pk}/", {"worktree": "main"}, format="json")
    assert response.status_code == 200 and response.json()["worktree"] == "main"
    assert Agent.objects.get(name="coder-1").worktree_id == ours.pk
    assert Project.objects.get(pk=project.pk).primary_worktree_id == ours.pk
    assert Issue.objects.get(pk=issue.pk).worktree_id == ours.pk
