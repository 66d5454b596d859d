"""Every /api/ answer is JSON, whatever the URL or method: the catch-all route and
the bounded ids of ``projektor/urls.py``."""

import pytest
from django.test import Client

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


def test_unknown_api_url_is_json_404(api):
    assert_error(api.get(f"{V1}/nope/"), 404, "not_found")
    assert_error(api.get(f"{V1}/issues/99999999999999999999999/"), 404, "not_found")
