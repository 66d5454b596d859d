"""Bearer API keys scoped to one workspace; logged-in members for humans."""

from typing import Any

from rest_framework import authentication, permissions
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from coordination.errors import InvalidInput, NotFound
from coordination.models import ApiKey, Workspace
from coordination.selectors.access import workspaces_visible_to
from coordination.services import keys

WORKSPACE_HEADER = "X-Projektor-Workspace"
WORKSPACE_PARAM = "workspace"  # the same, in the query: all a browser's EventSource can send


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiKey] | None:
        header = authorization_header(request)
        if not header:
            return None
        scheme, _, raw_key = header.partition(" ")
        if scheme.lower() != self.keyword.lower() or not raw_key.strip():
            raise AuthenticationFailed("Send the API key as 'Authorization: Bearer <key>'.")
        # Found by the SHA-256 digest of what was sent, in one indexed query; this is
        # as safe against timing attacks as a constant-time comparison, which is
        # therefore not added. The index compares digests, and its timing can at most
        # tell an attacker how long a prefix of *their own input's digest* matches a
        # stored digest. Growing that prefix means finding inputs whose digest starts
        # a given way (a brute-force search, 16 times longer for each hex digit), and
        # even a whole stored digest would be useless: the server hashes what it is
        # sent, so a digest is not a key, and SHA-256 cannot be inverted to a 256-bit
        # random key. A constant-time comparison protects a secret compared as sent;
        # here the attacker never reaches the secret, only its one-way image.
        key = keys.active_key(raw_key.strip())
        if key is None:
            raise AuthenticationFailed("The API key is unknown or revoked.")
        return (None, key)

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


def authorization_header(request: Request) -> str:
    """The ``Authorization`` header as sent. Read from ``META``: DRF's
    ``get_authorization_header`` builds ``request.headers``, a dict of every header,
    on each request for this one value."""
    header = request._request.META.get("HTTP_AUTHORIZATION", "")
    return header.decode("latin-1") if isinstance(header, bytes) else header


def is_human(request: Request) -> bool:
    """A logged-in person (session auth), as opposed to an agent's API key."""
    return not isinstance(request.auth, ApiKey) and bool(
        request.user and request.user.is_authenticated
    )


class WorkspaceMember(permissions.BasePermission):
    """Resolve the request's workspace: the key's, or the member's chosen one."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if isinstance(request.auth, ApiKey):
            request.workspace = request.auth.workspace  # type: ignore[attr-defined]
            return True
        if not is_human(request):
            return False
        slug = request.headers.get(WORKSPACE_HEADER) or request.query_params.get(WORKSPACE_PARAM)
        if not slug:
            raise InvalidInput(
                f"Name the workspace with the {WORKSPACE_HEADER} header or ?{WORKSPACE_PARAM}=."
            )
        workspace = workspaces_visible_to(request.user).filter(slug=slug).first()
        if workspace is None:
            raise NotFound("No such workspace.")
        request.workspace = workspace  # type: ignore[attr-defined]
        return True


def workspace_of(request: Request) -> Workspace:
    workspace: Workspace = request.workspace  # type: ignore[attr-defined]
    return workspace
