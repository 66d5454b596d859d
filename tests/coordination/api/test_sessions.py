"""REST API of sessions: register, heartbeat, end, list; a worktree of another workspace."""

import pytest

from coordination.models import Agent, AgentSession, Worktree
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire

pytestmark = pytest.mark.django_db


def test_register_session(api, workspace):
    response = post(api, "/sessions/", {"agent": "coder-1", "role": "engineer"})
    assert response.status_code == 201
    body = response.json()
    assert body["agent"] == "coder-1" and body["role"] == "engineer"
    assert body["status"] == "active" and body["live"] is True and body["worktree"] is None
    assert AgentSession.objects.filter(workspace=workspace, pk=body["id"]).exists()


def test_register_with_worktree_binds_the_agent(api, workspace):
    Worktree.objects.create(workspace=workspace, slug="main", name="Main")
    response = post(api, "/sessions/", {"agent": "coder-1", "worktree": "main"})
    assert response.status_code == 201 and response.json()["worktree"] == "main"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"agent": ""},
        {"agent": 5},
        {"agent": ["x"]},
        {"agent": "a\x00b"},
        {"agent": "x" * 101},
        {"agent": "a", "worktree": "missing"},
    ],
)
def test_register_bad_input_is_400(api, body):
    assert_error(post(api, "/sessions/", body), 400, "invalid")
    assert not AgentSession.objects.exists()


def test_register_body_must_be_an_object(api):
    assert_error(post(api, "/sessions/", ["agent"]), 400, "invalid")


def test_heartbeat_and_end(api, make_session):
    session = make_session()
    expire(session)
    beat = post(api, f"/sessions/{session.pk}/heartbeat/")
    assert beat.status_code == 200 and beat.json()["live"] is True
    end = post(api, f"/sessions/{session.pk}/end/")
    assert end.status_code == 200 and end.json()["status"] == "ended" and end.json()["ended_at"]
    assert_error(post(api, f"/sessions/{session.pk}/heartbeat/"), 409, "session_ended")


def test_heartbeat_end_and_get_of_unknown_session_are_404(api, workspace):
    assert_error(post(api, "/sessions/424242/heartbeat/"), 404, "not_found")
    assert_error(post(api, "/sessions/424242/end/"), 404, "not_found")
    assert_error(api.get(f"{V1}/sessions/424242/"), 404, "not_found")


def test_list_sessions_filters(api, make_session):
    live = make_session("a", role="engineer")
    stale = make_session("b", role="writer")
    expire(stale)

    def ids(query):
        response = api.get(f"{V1}/sessions/{query}")
        assert response.status_code == 200
        return [row["id"] for row in response.json()["results"]]

    assert ids("?live=true") == [live.pk]
    assert ids("?live=false") == [stale.pk]
    assert ids("?agent=b") == [stale.pk]
    assert ids("?role=engineer") == [live.pk]
    assert ids("?agent=b&live=true") == []
    assert ids("?agent=&role=") == [stale.pk, live.pk]  # empty: no filter, newest first
    assert api.get(f"{V1}/sessions/{live.pk}/").json()["live"] is True
    # A listed session is shown as the session itself is.
    listed = api.get(f"{V1}/sessions/?live=false").json()["results"]
    assert listed == [api.get(f"{V1}/sessions/{stale.pk}/").json()]
    assert_error(api.get(f"{V1}/sessions/?live=maybe"), 400, "invalid")


def test_list_is_paginated(api, make_session):
    for n in range(3):
        make_session(f"a{n}")
    body = api.get(f"{V1}/sessions/").json()
    assert set(body) == {"count", "next", "previous", "results"} and body["count"] == 3
    assert_error(api.get(f"{V1}/sessions/?page=9"), 404, "not_found")


# --- a worktree of another workspace (invariant 9 (workspace isolation))
# ------------------------------------


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
