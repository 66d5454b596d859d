"""Helpers shared by the API tests: a JSON POST and the error-shape assertion."""

from typing import Any

V1 = "/api/v1"


def post(client: Any, url: str, body: Any = None) -> Any:
    return client.post(f"{V1}{url}", body if body is not None else {}, format="json")


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The response is ``status`` with the JSON error shape and ``code``."""
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code and body["detail"]
    return body
