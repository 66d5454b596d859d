"""REST API for finishing runs: success and error statuses, the session's end, and
the fences of worktree locks."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from coordination.models import ReleaseReason, Run, WorktreeLock
from coordination.services import runs
from tests.api_helpers import V1, assert_error, post
from tests.coordination.api.runs_helpers import dispatch
from tests.coordination.conftest import dispatch_run, lock_fences, lock_of, state

pytestmark = pytest.mark.django_db


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
