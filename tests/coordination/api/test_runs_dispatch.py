"""REST API for dispatching runs: success and error statuses, isolation, bad input."""

import pytest

from coordination.models import IssueLease, ReleaseReason, Run, WipCapDenial, WorktreeLock
from coordination.services import leases
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire
from tests.coordination.api.runs_helpers import RUN_FIELDS, dispatch

pytestmark = pytest.mark.django_db


# --- dispatch: success ----------------------------------------------------------------


def test_dispatch_cognitive_run_is_201_without_a_worktree(api, issue, make_session):
    session = make_session()

    response = dispatch(api, session, issue)

    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == RUN_FIELDS
    assert {k: body[k] for k in ("issue", "session", "lock_mode", "worktree", "status")} == {
        "issue": issue.pk,
        "session": session.pk,
        "lock_mode": "none",
        "worktree": None,
        "status": "running",
    }
    assert body["error"] is None and body["finished_at"] is None and body["started_at"]
    assert Run.objects.get(pk=body["id"]).status == "running"
    assert IssueLease.objects.get(issue=issue).session_id == session.pk
    assert not WorktreeLock.objects.exists()


def test_dispatch_exclusive_run_is_201_with_the_worktree_slug(api, make_issue, make_session, tree):
    session = make_session("coder", worktree_slug="main")
    issue = make_issue(requires_filesystem=True)

    response = dispatch(api, session, issue)

    assert response.status_code == 201, response.content
    assert (response.json()["lock_mode"], response.json()["worktree"]) == ("exclusive", "main")
    assert WorktreeLock.objects.get().run_id == response.json()["id"]


def test_dispatch_on_the_primary_worktree_is_201_with_its_slug(
    api, make_issue, make_session, project, tree
):
    project.primary_worktree = tree
    project.save()
    session = make_session("integrator")

    response = post(
        api, "/runs/", {"session": session.pk, "issue": make_issue().pk, "primary_worktree": True}
    )

    assert response.status_code == 201, response.content
    assert (response.json()["lock_mode"], response.json()["worktree"]) == ("exclusive", "main")
    assert WorktreeLock.objects.get().run_id == response.json()["id"]


def test_dispatch_on_the_primary_worktree_without_one_is_400(api, issue, make_session):
    body = {"session": make_session().pk, "issue": issue.pk, "primary_worktree": True}

    error = assert_error(post(api, "/runs/", body), 400, "invalid")

    assert error["field"] == "primary_worktree" and "no primary worktree" in error["detail"]
    assert not Run.objects.exists() and not IssueLease.objects.exists()


# --- dispatch: failure modes ----------------------------------------------------------


def test_dispatch_unresolved_is_422_and_recorded_skipped(api, make_issue, make_session):
    issue = make_issue(requires_filesystem=True)

    body = assert_error(dispatch(api, make_session(), issue), 422, "worktree_unresolved")

    assert "primary worktree" in body["detail"]
    run = Run.objects.get(pk=body["run"])
    assert (run.status, run.error, run.lock_mode, run.worktree) == (
        "skipped",
        "worktree_unresolved",
        "none",
        None,
    )
    assert IssueLease.objects.get(issue=issue).release_reason == ReleaseReason.WORKTREE_UNRESOLVED


def test_dispatch_busy_is_409_naming_the_holder(api, make_issue, make_session, tree):
    holder = make_session("holder")
    first = dispatch(api, holder, make_issue(worktree=tree)).json()
    waiter, issue = make_session("waiter"), make_issue(worktree=tree)

    body = assert_error(dispatch(api, waiter, issue), 409, "worktree_busy")

    assert body["holder"] == {"session": holder.pk, "agent": "holder", "run": first["id"]}
    run = Run.objects.get(pk=body["run"])
    assert (run.status, run.error) == ("cancelled", "worktree_busy")
    assert IssueLease.objects.get(issue=issue, released_at__isnull=True).session_id == waiter.pk


def test_dispatch_by_a_session_that_is_not_live_is_409(api, issue, make_session):
    session = make_session()
    expire(session)

    assert_error(dispatch(api, session, issue), 409, "session_not_live")

    assert not Run.objects.exists()


def test_dispatch_of_an_issue_leased_by_another_is_409_lease_held(api, issue, make_session):
    holder = make_session("holder")
    leases.claim_issue(workspace=issue.workspace, issue_id=issue.pk, session_id=holder.pk)

    body = assert_error(dispatch(api, make_session("other"), issue), 409, "lease_held")

    assert body["holder"] == {"session": holder.pk, "agent": "holder"}
    assert not Run.objects.exists()


def test_dispatch_over_the_wip_cap_is_409_with_the_limit(api, project, make_issue, make_session):
    project.agent_wip_limit = 1
    project.save()
    assert dispatch(api, make_session("a"), make_issue()).status_code == 201

    body = assert_error(dispatch(api, make_session("b"), make_issue()), 409, "wip_limit_reached")

    assert body["limit"] == 1
    assert WipCapDenial.objects.count() == 1 and Run.objects.count() == 1


def test_dispatch_of_an_unknown_issue_is_404(api, make_session):
    assert_error(
        post(api, "/runs/", {"session": make_session().pk, "issue": 999999}), 404, "not_found"
    )
    assert not Run.objects.exists()


def test_dispatch_of_another_workspaces_issue_is_404(
    api, stranger_api, other_workspace, issue, make_session
):
    stranger = make_session("stranger", workspace=other_workspace)

    assert_error(dispatch(stranger_api, stranger, issue), 404, "not_found")

    assert not Run.objects.exists() and not IssueLease.objects.exists()


def test_dispatch_with_an_unknown_session_is_400(api, issue, other_workspace, make_session):
    foreign = make_session("stranger", workspace=other_workspace)

    assert_error(post(api, "/runs/", {"session": 999999, "issue": issue.pk}), 400, "invalid")
    assert_error(dispatch(api, foreign, issue), 400, "invalid")

    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"session": 1},
        {"issue": 1},
        {"session": "one", "issue": 1},
        {"session": 1, "issue": -1},
        {"session": 0, "issue": 1},
        {"session": 1, "issue": 2**64},
        {"session": 1, "issue": None},
        {"session": [1], "issue": 1},
        {"session": 1.5, "issue": 1},
        {"session": 1, "issue": 1, "primary_worktree": "yes"},
        {"session": 1, "issue": 1, "primary_worktree": None},
    ],
)
def test_bad_dispatch_body_is_400(api, workspace, body):
    assert_error(post(api, "/runs/", body), 400, "invalid")
    assert not Run.objects.exists()


def test_dispatch_body_must_be_json(api, issue, make_session):
    response = api.post(
        f"{V1}/runs/",
        f"session={make_session().pk}&issue={issue.pk}",
        content_type="application/x-www-form-urlencoded",
    )
    assert_error(response, 415, "unsupported_media_type")
    assert not Run.objects.exists()


def test_dispatch_needs_a_key(client, issue, make_session):
    response = client.post(
        f"{V1}/runs/", {"session": make_session().pk, "issue": issue.pk}, "application/json"
    )
    assert_error(response, 401, "unauthenticated")
    assert not Run.objects.exists()
