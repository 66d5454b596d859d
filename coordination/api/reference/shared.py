"""The refusals an operation may answer whatever it does: the hook
(``hooks.postprocess``) adds them to each operation from its place in the schema,
with what its route's rule refuses a key (coordination/api/access.py)."""

from collections.abc import Iterable
from typing import Any

from coordination import errors as e
from coordination.api.reference.refusals import Refusal, answer, refusal
from coordination.unavailable import UNAVAILABLE

# --- what every operation may answer --------------------------------------------------

INVALID_BODY = answer(
    400,
    "invalid",
    "the body does not validate (`errors`, per field), or names a row this workspace "
    "does not have (`field`)",
    "session: This field is required.",
    errors={"session": ["This field is required."]},
)
INVALID_QUERY = answer(
    400,
    "invalid",
    "a query parameter does not validate (`errors`, per field): a filter is never ignored",
    "since: Enter a valid date/time.",
    variant="query",
    errors={"since": ["Enter a valid date/time."]},
)
NO_WORKSPACE = refusal(
    e.InvalidInput,
    "a person's request names no workspace (`X-Projektor-Workspace` or `?workspace=`)",
    "Name the workspace with the X-Projektor-Workspace header or ?workspace=.",
    variant="workspace",
)
UNAUTHENTICATED = answer(
    401,
    "unauthenticated",
    "no credentials, or a malformed, unknown or revoked API key",
    "The API key is unknown or revoked.",
)
CSRF_FAILED = answer(
    403,
    "forbidden",
    "a person's write without its CSRF token",
    "CSRF Failed: CSRF token missing.",
    variant="csrf",
)
ID_NOT_FOUND = answer(
    404,
    "not_found",
    "the `{id}` is not in this workspace: another workspace's rows answer as absent "
    "(invariant 9 (workspace isolation))",
    "Not found.",
    variant="id",
)
PAGE_NOT_FOUND = answer(404, "not_found", "`page` is past the last page", "Invalid page.", "page")
WORKSPACE_NOT_FOUND = refusal(
    e.NotFound,
    "a person names a workspace they are not a member of",
    "No such workspace.",
    variant="workspace",
)
PAYLOAD_TOO_LARGE = answer(
    413, "payload_too_large", "the body is over 2.5 MB", "The request body is too large."
)
UNSUPPORTED_MEDIA_TYPE = answer(
    415,
    "unsupported_media_type",
    "the body is not `application/json`",
    'Unsupported media type "text/plain" in request.',
)
THROTTLED = answer(
    429,
    "throttled",
    "over the rate limit of the key (without one, of the address); `Retry-After` says "
    "when to retry",
    "Request was throttled. Expected available in 12 seconds.",
)
DATABASE_UNAVAILABLE = answer(
    503,
    "unavailable",
    "the database cannot be reached; `Retry-After` says when to retry",
    UNAVAILABLE["detail"],
)


def shared_refusals(
    *, method: str, path: str, operation: dict[str, Any], keyed: Iterable[Refusal] = ()
) -> list[Refusal]:
    """What an operation may answer whatever it does, from its place in the schema, and
    ``keyed``, what the route's rule refuses a key (coordination/api/access.py); within
    a status, the likelier first."""
    parameters = operation.get("parameters", [])
    queried = {p["name"] for p in parameters if p["in"] == "query"}
    shared = [*keyed]
    if "requestBody" in operation:
        shared += [INVALID_BODY, PAYLOAD_TOO_LARGE, UNSUPPORTED_MEDIA_TYPE]
    if queried - {"page"}:
        shared.append(INVALID_QUERY)
    if "{id}" in path:
        shared.append(ID_NOT_FOUND)
    if "page" in queried:
        shared.append(PAGE_NOT_FOUND)
    if method != "get":
        shared.append(CSRF_FAILED)
    if operation.get("security"):  # keyed: a key, or a person's session and workspace
        shared += [UNAUTHENTICATED, NO_WORKSPACE, WORKSPACE_NOT_FOUND]
    return [*shared, THROTTLED, DATABASE_UNAVAILABLE]
