"""REST API of projects, issues, the workflow, leases and WIP-cap denials
(``coordination/api/issues.py``): statuses, errors, filters, isolation, fences."""

from urllib.parse import urlencode

import pytest
from rest_framework.test import APIClient

from coordination.models import (
    Agent,
    AgentSession,
    Issue,
    IssueLease,
    Project,
    WipCapDenial,
    Worktree,
)
from coordination.services import leases
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire
from tests.coordination.conftest import snapshot, state

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


# --- leases ----------------------------------------------------------------------


def test_claim_and_release_via_api(api, issue, make_session):
    session = make_session()
    created = post(api, f"/issues/{issue.pk}/claim/", {"session": session.pk})
    assert created.status_code == 201 and created.json()["live"] is True
    again = post(api, f"/issues/{issue.pk}/claim/", {"session": session.pk})
    assert again.status_code == 200 and again.json()["id"] == created.json()["id"]
    assert api.get(f"{V1}/issues/{issue.pk}/").json()["lease"]["id"] == created.json()["id"]

    released = post(api, f"/issues/{issue.pk}/release/", {"session": session.pk})
    assert released.status_code == 200
    assert released.json()["release_reason"] == "released" and released.json()["live"] is False
    assert_error(
        post(api, f"/issues/{issue.pk}/release/", {"session": session.pk}), 409, "lease_not_held"
    )


def test_claim_errors_via_api(api, project, make_issue, make_session):
    issue = make_issue()
    holder, other, stale = make_session("holder"), make_session("other"), make_session("stale")
    expire(stale)
    post(api, f"/issues/{issue.pk}/claim/", {"session": holder.pk})

    held = assert_error(
        post(api, f"/issues/{issue.pk}/claim/", {"session": other.pk}), 409, "lease_held"
    )
    assert held["holder"] == {"session": holder.pk, "agent": "holder"}
    assert_error(
        post(api, f"/issues/{issue.pk}/claim/", {"session": stale.pk}), 409, "session_not_live"
    )
    for _ in range(2):
        post(api, f"/issues/{make_issue().pk}/claim/", {"session": other.pk})
    capped = assert_error(
        post(api, f"/issues/{make_issue().pk}/claim/", {"session": other.pk}),
        409,
        "wip_limit_reached",
    )
    assert capped["limit"] == 3
    assert WipCapDenial.objects.count() == 1
    assert_error(post(api, "/issues/999/claim/", {"session": other.pk}), 404, "not_found")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"session": "one"},
        {"session": None},
        {"session": 0},
        {"session": 2**70},
        {"session": 999},
        {"session": True},
    ],
)
def test_claim_bad_session_is_400(api, issue, body):
    assert_error(post(api, f"/issues/{issue.pk}/claim/", body), 400, "invalid")
    assert not IssueLease.objects.exists()


def test_list_leases_filters(api, project, make_issue, make_session):
    a, b = make_session("a"), make_session("b")
    first, second = make_issue(), make_issue()
    post(api, f"/issues/{first.pk}/claim/", {"session": a.pk})
    post(api, f"/issues/{second.pk}/claim/", {"session": b.pk})
    post(api, f"/issues/{second.pk}/release/", {"session": b.pk})

    def issue_ids(query):
        response = api.get(f"{V1}/leases/{query}")
        assert response.status_code == 200
        return [row["issue"] for row in response.json()["results"]]

    assert issue_ids("?active=true") == [first.pk]
    assert issue_ids("?active=false") == [second.pk]
    assert issue_ids(f"?session={b.pk}") == [second.pk]
    assert issue_ids(f"?issue={first.pk}") == [first.pk]
    assert issue_ids("?release_reason=released") == [second.pk]
    assert sorted(issue_ids("?project=core")) == sorted([first.pk, second.pk])
    assert_error(api.get(f"{V1}/leases/?session=abc"), 400, "invalid")
    assert_error(api.get(f"{V1}/leases/?session={2**70}"), 400, "invalid")


def test_wip_cap_denials_list_and_filters(api, workspace, project, make_issue, make_session):
    project.agent_wip_limit = 1
    project.save()
    session = make_session("coder")
    post(api, f"/issues/{make_issue().pk}/claim/", {"session": session.pk})
    refused = make_issue()
    post(api, f"/issues/{refused.pk}/claim/", {"session": session.pk})

    rows = api.get(f"{V1}/wip-cap-denials/?project=core").json()["results"]
    assert [(r["issue"], r["session"], r["agent"], r["limit"], r["project"]) for r in rows] == [
        (refused.pk, session.pk, "coder", 1, "core")
    ]
    occurred = WipCapDenial.objects.get().occurred_at
    at = urlencode({"t": occurred.isoformat()})[2:]
    assert api.get(f"{V1}/wip-cap-denials/?since={at}").json()["count"] == 1
    assert api.get(f"{V1}/wip-cap-denials/?until={at}").json()["count"] == 0
    assert_error(api.get(f"{V1}/wip-cap-denials/?since=yesterday"), 400, "invalid")


# --- workspace isolation (invariant 9) --------------------------------------------


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


# --- fences: a holder that lost its lease cannot release it ---------------------------


@pytest.mark.django_db
def test_a_lost_holder_cannot_release_with_its_old_fence(api, issue, lost_lease):
    old, first, new, second = lost_lease
    before = state()

    body = assert_error(
        post(api, f"/issues/{issue.pk}/release/", {"session": old.pk, "fence": first.fence}),
        409,
        "stale_fence",
    )

    assert body["fence"] == 1 and body["current_fence"] == 2
    assert state() == before
    assert IssueLease.objects.unreleased().get(issue=issue).session_id == new.pk
    # Even with the new holder's fence it is not the holder.
    assert_error(
        post(api, f"/issues/{issue.pk}/release/", {"session": old.pk, "fence": second.fence}),
        409,
        "lease_not_held",
    )
    assert state() == before


@pytest.mark.django_db
def test_the_holder_releases_with_its_fence(api, issue, lost_lease):
    _, _, new, second = lost_lease
    response = post(api, f"/issues/{issue.pk}/release/", {"session": new.pk, "fence": 2})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["fence"], body["release_reason"]) == (2, "released")
    assert not IssueLease.objects.unreleased().filter(issue=issue).exists()
    # Released, the fence is stale like any other.
    assert_error(
        post(api, f"/issues/{issue.pk}/release/", {"session": new.pk, "fence": 2}),
        409,
        "stale_fence",
    )


@pytest.mark.django_db
def test_without_a_fence_release_behaves_as_before(api, issue, lost_lease):
    old, _, new, _ = lost_lease
    assert_error(
        post(api, f"/issues/{issue.pk}/release/", {"session": old.pk}), 409, "lease_not_held"
    )
    response = post(api, f"/issues/{issue.pk}/release/", {"session": new.pk, "fence": None})
    assert response.status_code == 200, response.content


# --- links to another workspace (invariant 9) -----------------------------------------


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
