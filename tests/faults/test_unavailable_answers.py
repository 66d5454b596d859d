"""A database outage under a request, in process (SQLite and PostgreSQL): a 503
``unavailable`` with Retry-After, JSON for the API and MCP, a plain page for pages;
a bug is a 500, never an outage."""

import json
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.core.handlers.exception import convert_exception_to_response
from django.db import IntegrityError, InterfaceError, OperationalError, ProgrammingError
from django.test import RequestFactory
from rest_framework.test import APIClient

from coordination.api.auth import ApiKeyAuthentication
from coordination.models import Issue
from coordination.services import file_claims
from projektor.middleware import DatabaseUnavailableMiddleware, is_database_unavailable
from tests.api_helpers import V1, assert_error, post


def raising(error: Exception) -> Callable[..., Any]:
    def raise_it(*args: Any, **kwargs: Any) -> Any:
        raise error

    return raise_it


def sqlite_error(kind: type[Exception], message: str) -> Exception:
    """A Django database error as the SQLite backend raises it (driver error as cause)."""
    error = kind(message)
    error.__cause__ = sqlite3.OperationalError(message)
    return error


@pytest.fixture
def quiet_api(api: APIClient) -> APIClient:
    """The API client, answering 500s instead of raising the view's exception."""
    api.raise_request_exception = False
    return api


def claim_body(issue: Issue) -> dict[str, Any]:
    return {"issue": issue.pk, "paths": ["src/a.py"]}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "error",
    [
        OperationalError("connection failed: server closed the connection unexpectedly"),
        InterfaceError("the connection is closed"),
        sqlite_error(OperationalError, "database is locked"),
    ],
    ids=["operational", "interface", "sqlite-locked"],
)
def test_a_database_outage_under_api_is_503_json_with_retry_after(
    quiet_api, issue, monkeypatch, error
):
    monkeypatch.setattr(file_claims, "claim_files", raising(error))

    response = post(quiet_api, "/file-claims/", claim_body(issue))

    body = assert_error(response, 503, "unavailable")
    assert body == {"code": "unavailable", "detail": body["detail"]}
    assert response["Retry-After"].isdigit() and int(response["Retry-After"]) > 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "error",
    [
        IntegrityError("duplicate key value violates unique constraint"),
        ProgrammingError("relation does not exist"),
        sqlite_error(OperationalError, "no such table: issue_file_claims"),
        sqlite_error(InterfaceError, "Error binding parameter 1"),
    ],
    ids=["integrity", "programming", "sqlite-no-such-table", "sqlite-binding"],
)
def test_a_bug_is_not_an_outage(quiet_api, issue, monkeypatch, error):
    monkeypatch.setattr(file_claims, "claim_files", raising(error))

    response = post(quiet_api, "/file-claims/", claim_body(issue))

    assert_error(response, 500, "server_error")
    assert not response.has_header("Retry-After")
    assert not is_database_unavailable(error)


@pytest.mark.django_db
def test_an_outage_in_authentication_and_with_debug_is_still_503_json(
    quiet_api, issue, monkeypatch, settings
):
    settings.DEBUG = True  # no technical 500 page either
    monkeypatch.setattr(ApiKeyAuthentication, "authenticate", raising(OperationalError("down")))

    assert_error(post(quiet_api, "/file-claims/", claim_body(issue)), 503, "unavailable")
    assert_error(quiet_api.get(f"{V1}/issues/"), 503, "unavailable")


@pytest.mark.django_db
def test_pages_get_a_plain_503_page_and_session_auth_on_the_api_a_json_one(client, monkeypatch):
    client.raise_request_exception = False
    client.cookies["sessionid"] = "a-session-the-database-cannot-load"
    monkeypatch.setattr(SessionStore, "load", raising(OperationalError("down")))

    page = client.get("/workspaces/")
    assert page.status_code == 503
    assert page["Content-Type"].startswith("text/html") and page["Retry-After"].isdigit()
    assert b"unavailable" in page.content and b"Traceback" not in page.content

    assert_error(client.get(f"{V1}/issues/?workspace=acme"), 503, "unavailable")


@pytest.mark.django_db
def test_mcp_answers_503_json_with_retry_after(client, raw_key, monkeypatch):
    client.raise_request_exception = False
    monkeypatch.setattr(ApiKeyAuthentication, "authenticate", raising(OperationalError("down")))
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

    response = client.post(
        "/mcp",
        message,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw_key}",
        HTTP_ACCEPT="application/json, text/event-stream",
    )

    assert_error(response, 503, "unavailable")
    assert response["Retry-After"].isdigit()


@pytest.mark.parametrize(
    ("error", "status"),
    [(OperationalError("down"), 503), (IntegrityError("duplicate"), 500)],
    ids=["outage", "bug"],
)
def test_an_outage_raised_by_an_inner_middleware_is_503_too(error, status):
    """Django turns an error in another middleware into a 500 at that layer; the
    outer middleware replaces it when the error was an outage."""
    inner = convert_exception_to_response(raising(error))
    response = DatabaseUnavailableMiddleware(inner)(RequestFactory().get(f"{V1}/issues/"))

    assert response.status_code == status
    assert json.loads(response.content)["code"] == (
        "unavailable" if status == 503 else "server_error"
    )
    assert response.has_header("Retry-After") == (status == 503)
