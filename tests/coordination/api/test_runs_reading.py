"""REST API for reading runs: the list and its filters, a run's detail, isolation,
and whether a run is live."""

import pytest

from coordination.models import Run
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire
from tests.coordination.api.runs_helpers import RUN_FIELDS

pytestmark = pytest.mark.django_db


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
