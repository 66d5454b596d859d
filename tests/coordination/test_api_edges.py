"""Every /api/ answer is JSON, whatever the URL, method, id, body or its size."""

import pytest
from django.test import Client

from coordination.models import FileClaim, IssueLease
from coordination.services import file_claims, leases
from tests.api_helpers import V1, assert_error

pytestmark = pytest.mark.django_db


@pytest.fixture
def strict_client():
    """A client with CSRF checks on, as a browser-less agent meets them."""
    return Client(enforce_csrf_checks=True)


@pytest.mark.parametrize(
    "method,url",
    [
        ("post", "/api/v1/issues/abc/claim/"),
        ("post", "/api/v1/sessions/-1/heartbeat/"),
        ("post", "/api/v1/runs/18446744073709551616/finish/"),
        ("patch", "/api/v1/projects/9223372036854775807/"),
        ("delete", "/api/v1/nowhere/"),
        ("put", "/api/"),
        ("get", "/api/v2/issues/"),
    ],
)
def test_unmatched_or_absurd_urls_answer_json_without_csrf(strict_client, api, method, url):
    headers = {"Authorization": api._credentials["HTTP_AUTHORIZATION"]}
    body = {} if method == "get" else {"data": "{}", "content_type": "application/json"}
    response = getattr(strict_client, method)(url, headers=headers, **body)
    assert response.status_code in (401, 404), response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["code"] in ("not_found", "unauthenticated")


@pytest.mark.parametrize(
    "pk", ["9223372036854775807", "9223372036854775808", "9999999999999999999"]
)
def test_a_19_digit_id_is_a_plain_404(api, project, pk):
    assert_error(api.patch(f"{V1}/projects/{pk}/", {"name": "x"}, format="json"), 404, "not_found")
    assert_error(api.get(f"{V1}/issues/{pk}/"), 404, "not_found")
    assert_error(
        api.post(f"{V1}/issues/{pk}/claim/", {"session": 1}, format="json"), 404, "not_found"
    )


def test_an_absurd_id_still_needs_a_key(client):
    assert_error(client.get(f"{V1}/issues/9999999999999999999/"), 401, "unauthenticated")


def test_an_oversized_body_is_413_json(api, issue, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    body = {"issue": issue.pk, "paths": ["a" * 100] * 50}
    assert_error(api.post(f"{V1}/file-claims/", body, format="json"), 413, "payload_too_large")
    assert not FileClaim.objects.exists()


def test_unreleased_rows_show_null_release_fields(api, workspace, issue, make_session):
    session = make_session()
    leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["a.py"], session_id=session.pk
    )
    lease = api.get(f"{V1}/leases/").json()["results"][0]
    claim = api.get(f"{V1}/file-claims/").json()["results"][0]
    assert (lease["released_at"], lease["release_reason"]) == (None, None)
    assert (claim["released_at"], claim["release_reason"]) == (None, None)
    issue_body = api.get(f"{V1}/issues/{issue.pk}/").json()
    assert issue_body["lease"]["release_reason"] is None
    leases.release_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
    assert api.get(f"{V1}/leases/").json()["results"][0]["release_reason"] == "released"
    assert IssueLease.objects.get().release_reason == "released"


@pytest.mark.parametrize(
    "since",
    ["1643-12-17T22:55:02-20:28", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"],
)
def test_times_with_odd_offsets_are_a_400_or_an_answer_never_a_500(api, workspace, since):
    for url in ("/claim-conflicts/", "/wip-cap-denials/", "/messages/"):
        response = api.get(f"{V1}{url}", {"since": since})
        assert response.status_code in (200, 400), response.content
        assert response["Content-Type"].startswith("application/json")


def test_docs_and_schema_are_public_whatever_key_is_sent(client):
    bad = {"Authorization": "Bearer pk_not-a-key"}
    assert client.get("/api/v1/schema/?format=json", headers=bad).status_code == 200
    assert client.get("/api/v1/docs/", headers=bad).status_code == 200


def test_a_throttled_docs_page_answers_json(client):
    bad = {"Authorization": "Bearer pk_not-a-key"}
    for _ in range(200):
        response = client.get("/api/v1/docs/", headers=bad, REMOTE_ADDR="10.9.9.9")
        if response.status_code == 429:
            break
    assert response.status_code == 429
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["code"] == "throttled"
