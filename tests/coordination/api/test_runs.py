"""REST API for worktrees and runs: success and error statuses, isolation, bad input."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from coordination.models import (
    IssueLease,
    ReleaseReason,
    Run,
    WipCapDenial,
    Worktree,
    WorktreeLock,
)
from coordination.services import leases, runs
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire
from tests.coordination.conftest import dispatch_run, lock_fences, lock_of, state

pytestmark = pytest.mark.django_db

RUN_FIELDS = {
    "id",
    "live",
    "issue",
    "session",
    "lock_mode",
    "worktree",
    "fence",
    "status",
    "error",
    "started_at",
    "finished_at",
}


def dispatch(client, session, issue):
    return post(client, "/runs/", {"session": session.pk, "issue": issue.pk})


# --- worktrees ----------------------------------------------------------------------


def test_create_worktree_is_201(api, workspace):
    response = post(
        api, "/worktrees/", {"slug": "main", "name": "Main", "path": "/srv/m", "branch": "dev"}
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert {k: body[k] for k in ("slug", "name", "path", "branch")} == {
        "slug": "main",
        "name": "Main",
        "path": "/srv/m",
        "branch": "dev",
    }
    assert Worktree.objects.get(workspace=workspace, slug="main").branch == "dev"


def test_create_worktree_with_slug_and_name_only(api, workspace):
    response = post(api, "/worktrees/", {"slug": "docs", "name": "Docs"})
    assert response.status_code == 201, response.content
    assert response.json()["path"] == "" and response.json()["branch"] == ""
    assert Worktree.objects.filter(workspace=workspace, slug="docs").exists()


def test_duplicate_worktree_slug_is_400(api, tree):
    body = assert_error(post(api, "/worktrees/", {"slug": "main", "name": "Again"}), 400, "invalid")
    assert body["field"] == "slug"
    assert Worktree.objects.filter(slug="main").count() == 1


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"slug": "main"},
        {"name": "Main"},
        {"slug": "not a slug", "name": "Main"},
        {"slug": 5, "name": "Main"},
        {"slug": "main", "name": ["Main"]},
        {"slug": "main", "name": "Main", "path": 3},
        {"slug": "main", "name": "Ma\x00in"},
        {"slug": "x" * 65, "name": "Main"},
        {"slug": "main", "name": "Main", "path": "p" * 1025},
    ],
)
def test_bad_worktree_body_is_400(api, workspace, body):
    assert_error(post(api, "/worktrees/", body), 400, "invalid")
    assert not Worktree.objects.exists()


def test_worktree_body_must_be_json(api, workspace):
    response = api.post(f"{V1}/worktrees/", "slug=main&name=Main", content_type="text/plain")
    assert_error(response, 415, "unsupported_media_type")
    assert not Worktree.objects.exists()


def test_list_worktrees_shows_only_this_workspace(api, stranger_api, tree, other_workspace):
    Worktree.objects.create(workspace=other_workspace, slug="theirs", name="Theirs")

    response = api.get(f"{V1}/worktrees/")

    assert response.status_code == 200
    assert [w["slug"] for w in response.json()["results"]] == ["main"]
    assert [w["slug"] for w in stranger_api.get(f"{V1}/worktrees/").json()["results"]] == ["theirs"]


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


# --- finish ---------------------------------------------------------------------------


def test_finish_is_200_and_releases_the_lock(api, make_issue, make_session, tree):
    run_id = dispatch(api, make_session(), make_issue(worktree=tree)).json()["id"]

    response = post(api, f"/runs/{run_id}/finish/", {"outcome": "succeeded"})

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "succeeded" and response.json()["finished_at"]
    assert WorktreeLock.objects.get().release_reason == ReleaseReason.RELEASED
    assert Run.objects.get(pk=run_id).status == "succeeded"


def test_finish_of_a_finished_run_is_409(api, issue, make_session):
    run_id = dispatch(api, make_session(), issue).json()["id"]
    post(api, f"/runs/{run_id}/finish/", {"outcome": "failed"})

    assert_error(
        post(api, f"/runs/{run_id}/finish/", {"outcome": "succeeded"}), 409, "run_not_running"
    )

    assert Run.objects.get(pk=run_id).status == "failed"


def test_finish_of_an_unknown_run_is_404(api, workspace):
    assert_error(post(api, "/runs/999999/finish/", {"outcome": "failed"}), 404, "not_found")
    assert_error(post(api, f"/runs/{'9' * 30}/finish/", {"outcome": "failed"}), 404, "not_found")


@pytest.mark.parametrize(
    "body", [{}, {"outcome": "cancelled"}, {"outcome": "running"}, {"outcome": 1}, []]
)
def test_bad_finish_body_is_400(api, issue, make_session, body):
    run_id = dispatch(api, make_session(), issue).json()["id"]

    assert_error(post(api, f"/runs/{run_id}/finish/", body), 400, "invalid")

    assert Run.objects.get(pk=run_id).status == "running"


def test_ending_the_session_through_the_api_cancels_its_runs(api, make_issue, make_session, tree):
    session = make_session()
    run_id = dispatch(api, session, make_issue(worktree=tree)).json()["id"]

    assert post(api, f"/sessions/{session.pk}/end/").status_code == 200

    assert api.get(f"{V1}/runs/{run_id}/").json()["status"] == "cancelled"
    assert WorktreeLock.objects.get().release_reason == ReleaseReason.AGENT_ENDED


# --- reading runs ---------------------------------------------------------------------


def ids(response):
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


def test_list_runs_shows_every_run_with_its_error(api, three_runs):
    rows = {row["id"]: row for row in api.get(f"{V1}/runs/").json()["results"]}

    assert set(rows) == set(three_runs.values())
    assert rows[three_runs["running"]]["error"] is None
    assert rows[three_runs["cancelled"]]["error"] == "worktree_busy"
    assert rows[three_runs["skipped"]]["error"] == "worktree_unresolved"
    assert rows[three_runs["skipped"]]["worktree"] is None
    assert rows[three_runs["cancelled"]]["worktree"] == "main"


def test_list_runs_filters_by_error_and_status(api, three_runs):
    assert ids(api.get(f"{V1}/runs/?error=worktree_busy")) == {three_runs["cancelled"]}
    assert ids(api.get(f"{V1}/runs/?error=worktree_unresolved")) == {three_runs["skipped"]}
    assert ids(api.get(f"{V1}/runs/?status=running")) == {three_runs["running"]}
    assert ids(api.get(f"{V1}/runs/?status=skipped")) == {three_runs["skipped"]}


def test_list_runs_filters_by_issue_and_session(api, three_runs):
    run = Run.objects.get(pk=three_runs["cancelled"])

    assert ids(api.get(f"{V1}/runs/?issue={run.issue_id}")) == {run.pk}
    assert ids(api.get(f"{V1}/runs/?session={run.session_id}")) == {run.pk}


@pytest.mark.parametrize(
    "query", ["error=nope", "status=done", "issue=abc", "session=-1", f"issue={2**64}"]
)
def test_bad_run_filters_are_400(api, three_runs, query):
    assert_error(api.get(f"{V1}/runs/?{query}"), 400, "invalid")


def test_get_run_is_200(api, three_runs):
    response = api.get(f"{V1}/runs/{three_runs['skipped']}/")

    assert response.status_code == 200
    assert set(response.json()) == RUN_FIELDS
    assert (response.json()["status"], response.json()["lock_mode"]) == ("skipped", "none")


def test_get_unknown_run_is_404(api, workspace):
    assert_error(api.get(f"{V1}/runs/999999/"), 404, "not_found")
    assert_error(api.get(f"{V1}/runs/abc/"), 404, "not_found")


def test_runs_of_another_workspace_are_404_for_a_stranger(stranger_api, three_runs):
    for run_id in three_runs.values():
        assert_error(stranger_api.get(f"{V1}/runs/{run_id}/"), 404, "not_found")
    running = three_runs["running"]
    assert_error(
        post(stranger_api, f"/runs/{running}/finish/", {"outcome": "failed"}), 404, "not_found"
    )
    assert ids(stranger_api.get(f"{V1}/runs/")) == set()
    assert Run.objects.get(pk=running).status == "running"


# --- liveness of runs -------------------------------------------------------------------


def test_a_running_run_of_a_dead_session_is_not_live(api, three_runs):
    running = Run.objects.get(pk=three_runs["running"])
    assert api.get(f"{V1}/runs/{running.pk}/").json()["live"] is True
    assert ids(api.get(f"{V1}/runs/?live=true")) == {running.pk}

    expire(running.session)

    body = api.get(f"{V1}/runs/{running.pk}/").json()
    assert (body["status"], body["live"]) == ("running", False)
    assert ids(api.get(f"{V1}/runs/?status=running&live=true")) == set()
    assert ids(api.get(f"{V1}/runs/?live=false")) == set(three_runs.values())


def test_finished_runs_are_not_live(api, three_runs):
    rows = {row["id"]: row["live"] for row in api.get(f"{V1}/runs/").json()["results"]}
    assert rows == {
        three_runs["running"]: True,
        three_runs["cancelled"]: False,
        three_runs["skipped"]: False,
    }


def test_bad_live_filter_is_400(api, three_runs):
    assert_error(api.get(f"{V1}/runs/?live=maybe"), 400, "invalid")


# --- fences ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_run_without_a_lock_has_no_fence(api, issue, make_session):
    body = post(api, "/runs/", {"session": make_session().pk, "issue": issue.pk}).json()
    assert body["lock_mode"] == "none" and body["fence"] is None
    assert api.get(f"{V1}/runs/").json()["results"][0]["fence"] is None


@pytest.mark.django_db
def test_a_busy_worktree_gives_the_cancelled_run_no_fence(api, make_issue, make_session, tree):
    post(api, "/runs/", {"session": make_session("a").pk, "issue": make_issue(worktree=tree).pk})
    issue = make_issue(worktree=tree)
    assert_error(
        post(api, "/runs/", {"session": make_session("b").pk, "issue": issue.pk}),
        409,
        "worktree_busy",
    )
    cancelled = Run.objects.get(issue=issue)
    assert api.get(f"{V1}/runs/{cancelled.pk}/").json()["fence"] is None
    assert lock_fences(tree) == [1]


@pytest.mark.django_db
def test_the_run_list_costs_the_same_queries_for_one_run_and_many(
    api, workspace, make_issue, make_session, tree, roomy
):
    session = make_session()
    run = dispatch_run(workspace, session, make_issue(worktree=tree))
    api.get(f"{V1}/runs/")  # warm up whatever a first request does once
    with CaptureQueriesContext(connection) as one:
        assert api.get(f"{V1}/runs/").status_code == 200
    for _ in range(4):
        runs.finish_run(workspace=workspace, run_id=run.pk, outcome="succeeded")
        run = dispatch_run(workspace, session, make_issue(worktree=tree))
    with CaptureQueriesContext(connection) as five:
        body = api.get(f"{V1}/runs/").json()
    assert [r["fence"] for r in body["results"]] == [5, 4, 3, 2, 1]
    assert len(five) == len(one)


@pytest.mark.django_db
def test_a_lost_holder_cannot_finish_its_run_with_its_old_fence(api, lost_lock):
    old_run, new_run = lost_lock
    before = state()

    body = assert_error(
        post(api, f"/runs/{old_run.pk}/finish/", {"outcome": "succeeded", "fence": 1}),
        409,
        "stale_fence",
    )

    assert body["fence"] == 1 and body["current_fence"] == 2
    assert state() == before
    assert Run.objects.get(pk=old_run.pk).status == Run.Status.RUNNING
    assert lock_of(new_run).released_at is None
    # Nor with the new holder's fence: it is not the lock of this run.
    assert_error(
        post(api, f"/runs/{old_run.pk}/finish/", {"outcome": "failed", "fence": 2}),
        409,
        "stale_fence",
    )
    assert state() == before

    response = post(api, f"/runs/{new_run.pk}/finish/", {"outcome": "succeeded", "fence": 2})
    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["fence"]) == ("succeeded", 2)
    assert lock_of(new_run).release_reason == ReleaseReason.RELEASED


@pytest.mark.django_db
def test_without_a_fence_finishing_a_run_behaves_as_before(api, lost_lock):
    old_run, new_run = lost_lock
    response = post(api, f"/runs/{old_run.pk}/finish/", {"outcome": "failed"})
    assert response.status_code == 200, response.content
    assert lock_of(old_run).release_reason == ReleaseReason.EXPIRED  # kept its first reason
    assert lock_of(new_run).released_at is None


@pytest.mark.django_db
def test_a_wrong_fence_on_a_held_lock_or_a_lockless_run_changes_nothing(
    api, workspace, make_issue, make_session, tree, roomy
):
    session = make_session()
    locked = dispatch_run(workspace, session, make_issue(worktree=tree))
    lockless = dispatch_run(workspace, session, make_issue())
    before = state()
    for run, fence in [(locked, 2), (lockless, 1)]:
        assert_error(
            post(api, f"/runs/{run.pk}/finish/", {"outcome": "succeeded", "fence": fence}),
            409,
            "stale_fence",
        )
    assert state() == before
    response = post(api, f"/runs/{locked.pk}/finish/", {"outcome": "succeeded", "fence": 1})
    assert response.status_code == 200, response.content
    assert_error(
        post(api, f"/runs/{locked.pk}/finish/", {"outcome": "succeeded", "fence": 1}),
        409,
        "run_not_running",
    )
