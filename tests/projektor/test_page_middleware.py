"""The page-only middlewares (sessions, CSRF, the user from the session, messages,
clickjacking) serve the pages and a logged-in browser's API calls; a keyed call or a
probe without a session cookie goes past them (projektor/middleware.py)."""

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.test import Client
from rest_framework.test import APIClient

from projektor.middleware import PagesOnlyStart
from tests.conftest import password_of

V1 = "/api/v1"
WORKSPACE = {"X-Projektor-Workspace": "acme"}


def went_past_the_pages_stack(response) -> bool:
    request = response.wsgi_request  # (DRF sets ``user`` on it, whichever way it went)
    return not hasattr(request, "session") and not hasattr(request, "_messages")


def test_a_keyed_call_goes_past_the_page_middlewares(api):
    response = api.get(f"{V1}/workflow/")
    assert response.status_code == 200
    assert went_past_the_pages_stack(response), response.status_code
    assert not response.cookies
    assert "X-Frame-Options" not in response
    assert "Cookie" not in response.get("Vary", "")
    # The stack's other layers stay: the request id, the security headers.
    assert response["X-Request-ID"]
    assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/mcp", f"{V1}/no-such-thing/"])
def test_probes_mcp_and_unknown_api_urls_go_past_them(client, db, path):
    response = client.get(path)
    assert went_past_the_pages_stack(response), response.status_code
    assert not response.cookies


def test_a_keyed_post_needs_no_csrf_token(api):
    strict = APIClient(enforce_csrf_checks=True)
    strict.credentials(HTTP_AUTHORIZATION=api._credentials["HTTP_AUTHORIZATION"])
    response = strict.post(f"{V1}/sessions/", {"agent": "bot"}, format="json")
    assert response.status_code == 201, response.content


def test_the_login_page_keeps_sessions_csrf_and_clickjacking(db):
    client = Client(enforce_csrf_checks=True)
    page = client.get("/login/")
    assert page.status_code == 200
    assert hasattr(page.wsgi_request, "session") and hasattr(page.wsgi_request, "user")
    assert settings.CSRF_COOKIE_NAME in page.cookies
    assert page["X-Frame-Options"] == "DENY"
    refused = client.post("/login/", {"username": "alice", "password": "x"})
    assert refused.status_code == 403  # no CSRF token in the form


def test_the_admin_keeps_them(admin_client):
    response = admin_client.get("/admin/")
    assert response.status_code == 200
    assert response.wsgi_request.user.is_staff
    assert response["X-Frame-Options"] == "DENY"


def test_a_logged_in_browser_calling_the_api_keeps_session_and_csrf(alice, make_issue):
    issue = make_issue(status="in_review")
    browser = APIClient(enforce_csrf_checks=True)
    assert browser.login(username="alice", password=password_of("alice"))
    read = browser.get(f"{V1}/workflow/", headers=WORKSPACE)
    assert read.status_code == 200 and read.wsgi_request.user == alice
    url = f"{V1}/issues/{issue.pk}/transition/"
    refused = browser.post(url, {"to": "done"}, format="json", headers=WORKSPACE)
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    token = "t" * 32  # a CSRF secret, in the cookie and echoed in the header
    browser.cookies[settings.CSRF_COOKIE_NAME] = token
    accepted = browser.post(
        url, {"to": "done"}, format="json", headers={**WORKSPACE, "X-CSRFToken": token}
    )
    assert accepted.status_code == 200, accepted.content


def test_the_start_without_its_end_is_refused():
    with pytest.raises(ImproperlyConfigured):
        PagesOnlyStart(HttpResponse)
