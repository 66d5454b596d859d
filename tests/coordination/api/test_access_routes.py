"""The key is the actor (invariant 13 (the key is the actor)): every API route, against five
callers, with the status each must get; every refusal leaves the database as it was.

The callers (``PERSONAS``): a fleet key; the agent key of ``alpha`` acting in alpha's
own session (it may force); the same key naming ``beta``'s session, run, issue or
name; alpha's agent key minted without ``can_force``, forcing where a call can; and a
read key. Fleet, own, no-force and read callers name alpha's objects; the other
caller names beta's. The routes come from the URL resolver: a route without an
expectation here, or without a rule in coordination/api/access.py, fails the test,
so none can be forgotten.

A refusal is 403 ``forbidden``, and every row of every coordination table (the logs
and the event log included) is what it was before the call.
"""

from typing import Any

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from coordination.api import access
from tests.conftest import make_client
from tests.coordination.api.access_helpers import (
    CALLS,
    CASES,
    EXPECTED,
    NO,
    PERSONAS,
    ROUTE_KEYS,
    World,
    snapshot,
)

pytestmark = pytest.mark.django_db


def test_every_route_has_an_expectation_a_call_and_a_rule():
    assert set(EXPECTED) == set(ROUTE_KEYS), set(EXPECTED) ^ set(ROUTE_KEYS)
    assert set(CALLS) == set(ROUTE_KEYS)
    assert set(access.RULES) == set(ROUTE_KEYS), set(access.RULES) ^ set(ROUTE_KEYS)
    assert all(len(statuses) == len(PERSONAS) for statuses in EXPECTED.values())


def rest_call(world: World, route: tuple[str, str], persona: str) -> Any:
    name, method = route
    call = CALLS[route](world, world.side(persona))
    kwargs = {"pk": call.pk} if call.pk is not None else {}
    url = reverse(name, kwargs={**kwargs, "link": call.link} if call.link else kwargs)
    client: APIClient = make_client(world.raw[persona])
    if method == "GET":
        return client.get(url)
    return getattr(client, method.lower())(url, call.body or {}, format="json")


@pytest.mark.parametrize(
    ("route", "persona"), CASES, ids=lambda v: "-".join(v) if isinstance(v, tuple) else v
)
def test_each_route_answers_each_caller_as_expected(world, route, persona):
    expected = EXPECTED[route][PERSONAS.index(persona)]
    before = snapshot()
    response = rest_call(world, route, persona)
    assert response.status_code == expected, (route, persona, response.content[:400])
    if expected == NO:
        body = response.json()
        assert body["code"] == "forbidden" and body["detail"], body
        assert snapshot() == before, "a refusal changed the database"
