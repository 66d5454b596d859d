"""Statements per request, pinned by ``query_counts.COUNTS``.

Every list (and detail) endpoint is asked with 2 and with 10 rows of every kind:
the count must equal the table's both times, so a query per row shows. Every state
change is asked on the same two worlds, and those that take paths with 2 and 10
paths. The rate limits are off (their counter is one statement more per request
on PostgreSQL's database cache, none on Redis or in SQLite's counters' own file; the
bench counts it).
"""

from typing import Any

import pytest
from django.db import connection

from coordination.models import Workspace
from coordination.services import keys
from tests.api_helpers import V1
from tests.conftest import make_client
from tests.coordination.api.query_count_world import (
    AS_AGENT,
    KEY_CALLS,
    STATE_CHANGES,
    World,
    build_world,
    key_calls,
)
from tests.coordination.api.query_counts import COUNTS, expected

pytestmark = pytest.mark.django_db

ROWS = [2, 10]


@pytest.fixture(autouse=True)
def _no_rate_limits(settings: Any) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"key": None, "anon": None},
    }


@pytest.fixture(params=ROWS, ids=lambda rows: f"{rows}rows")
def world(request: pytest.FixtureRequest, workspace: Workspace) -> World:
    return build_world(workspace, request.param)


def count(django_assert_num_queries: Any, endpoint: str) -> Any:
    return django_assert_num_queries(expected(endpoint, connection.vendor))


# --- reads -----------------------------------------------------------------------------

LISTS = {
    "GET /sessions/": ("/sessions/", 1),
    "GET /sessions/?live=true": ("/sessions/?live=true", 1),
    "GET /projects/": ("/projects/", 1),
    "GET /issues/": ("/issues/", 3),
    "GET /issues/?leased=true": ("/issues/?leased=true", 1),
    "GET /issues/ready/": ("/issues/ready/", 1),
    "GET /issues/ready/?include_not_ready=true": ("/issues/ready/?include_not_ready=true", 2),
    "GET /leases/": ("/leases/", 1),
    "GET /wip-cap-denials/": ("/wip-cap-denials/", 1),
    "GET /worktrees/": ("/worktrees/", 1),
    "GET /runs/": ("/runs/", 1),
    "GET /file-claims/": ("/file-claims/", 1),
    "GET /file-claims/?covering=": ("/file-claims/?covering=tree/0/a/b.py", 0),
    "GET /claim-conflicts/": ("/claim-conflicts/", 1),
    "GET /messages/": ("/messages/", 1),
    "GET /resources/": ("/resources/", 0),  # one resource, its holders inside
    "GET /resource-holds/": ("/resource-holds/", 1),
    "GET /messages/?agent=": ("/messages/?agent=agent-0", 0),  # one agent's: 1 or more
}


@pytest.mark.parametrize("endpoint", LISTS)
def test_a_list_costs_the_same_however_many_rows(endpoint, world, api, django_assert_num_queries):
    url, per_row = LISTS[endpoint]
    with count(django_assert_num_queries, endpoint):
        response = api.get(V1 + url)
    assert response.status_code == 200, response.content
    # Every row of the kind is rendered (per_row of them per world row).
    assert response.json()["count"] >= per_row * world.rows


DETAILS = {
    "GET /sessions/{id}/": lambda w: f"/sessions/{w.sessions[0].pk}/",
    "GET /projects/{id}/": lambda w: f"/projects/{w.project.pk}/",
    "GET /issues/{id}/": lambda w: f"/issues/{w.leased[0].pk}/",
    "GET /leases/{id}/": lambda w: f"/leases/{w.leased[0].leases.get().pk}/",
    "GET /runs/{id}/": lambda w: f"/runs/{w.leased[0].runs.get().pk}/",
    "GET /file-claims/{id}/": lambda w: f"/file-claims/{w.leased[0].file_claims.first().pk}/",
    "GET /workflow/": lambda w: "/workflow/",
}


@pytest.mark.parametrize("endpoint", DETAILS)
def test_a_detail_costs_what_the_table_says(endpoint, world, api, django_assert_num_queries):
    url = DETAILS[endpoint](world)
    with count(django_assert_num_queries, endpoint):
        response = api.get(V1 + url)
    assert response.status_code == 200, response.content


# --- state changes ---------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", STATE_CHANGES)
def test_a_state_change_costs_the_same_however_many_rows(
    endpoint, world, api, django_assert_num_queries
):
    call = STATE_CHANGES[endpoint](world)
    send = api.patch if call.method == "PATCH" else api.post
    with count(django_assert_num_queries, endpoint):
        response = send(V1 + call.url, call.body, format="json")
    assert response.status_code == call.status, response.content


@pytest.mark.parametrize("endpoint", AS_AGENT)
def test_an_agent_keys_call_costs_what_the_table_says(endpoint, world, django_assert_num_queries):
    _, raw = keys.mint_key(
        workspace=world.workspace, kind="agent", agent_name="agent-0", can_force=True
    )
    call = AS_AGENT[endpoint](world)
    with count(django_assert_num_queries, endpoint):
        response = make_client(raw).post(V1 + call.url, call.body, format="json")
    assert response.status_code == call.status, response.content


@pytest.mark.parametrize("endpoint", KEY_CALLS)
def test_a_key_call_costs_what_the_table_says(endpoint, world, django_assert_num_queries):
    for i in range(world.rows):  # rows of every kind: keys too
        keys.mint_key(workspace=world.workspace, name=f"k{i}", kind="agent", agent_name=f"a{i}")
    key, raw = keys.mint_key(workspace=world.workspace, name="fleet")
    call = key_calls(world, key.pk)[endpoint]
    client = make_client(raw)
    with count(django_assert_num_queries, endpoint):
        if call.method == "GET":
            response = client.get(V1 + call.url)
        else:
            response = client.post(V1 + call.url, call.body, format="json")
    assert response.status_code == call.status, response.content


def test_the_table_names_every_endpoint_it_pins():
    assert set(COUNTS) == {*LISTS, *DETAILS, *STATE_CHANGES, *AS_AGENT, *KEY_CALLS}
