"""REST API of leases (``coordination/api/issues.py``): claim and release, their errors,
the lease and WIP-cap denial lists and their filters, and fences: a holder that lost its
lease cannot release it."""

from urllib.parse import urlencode

import pytest

from coordination.models import (
    IssueLease,
    WipCapDenial,
)
from tests.api_helpers import V1, assert_error, post
from tests.conftest import expire
from tests.coordination.conftest import state

pytestmark = pytest.mark.django_db


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
