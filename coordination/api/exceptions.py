"""One exception handler: every API error is ``{"code", "detail", ...}``."""

from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from coordination.errors import CoordinationError

DRF_CODES: dict[type[exceptions.APIException], tuple[str, int]] = {
    exceptions.NotAuthenticated: ("unauthenticated", status.HTTP_401_UNAUTHORIZED),
    exceptions.AuthenticationFailed: ("unauthenticated", status.HTTP_401_UNAUTHORIZED),
    exceptions.PermissionDenied: ("forbidden", status.HTTP_403_FORBIDDEN),
    exceptions.NotFound: ("not_found", status.HTTP_404_NOT_FOUND),
    exceptions.MethodNotAllowed: ("method_not_allowed", status.HTTP_405_METHOD_NOT_ALLOWED),
    exceptions.NotAcceptable: ("not_acceptable", status.HTTP_406_NOT_ACCEPTABLE),
    exceptions.UnsupportedMediaType: (
        "unsupported_media_type",
        status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
    ),
    exceptions.ParseError: ("invalid", status.HTTP_400_BAD_REQUEST),
    exceptions.ValidationError: ("invalid", status.HTTP_400_BAD_REQUEST),
    exceptions.Throttled: ("throttled", status.HTTP_429_TOO_MANY_REQUESTS),
}


def _first_message(errors: Any) -> str:
    """The first human sentence inside DRF's nested validation errors."""
    if isinstance(errors, dict):
        for field, value in errors.items():
            message = _first_message(value)
            return message if field == "non_field_errors" else f"{field}: {message}"
    if isinstance(errors, list) and errors:
        return _first_message(errors[0])
    return str(errors)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, CoordinationError):
        return Response(exc.as_dict(), status=exc.status)
    if isinstance(exc, RequestDataTooBig):  # Django would answer an HTML 400 page
        return Response(
            {"code": "payload_too_large", "detail": "The request body is too large."},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    code, status_code = next(
        (mapped for kind, mapped in DRF_CODES.items() if isinstance(exc, kind)),
        (exc.default_code, exc.status_code),
    )
    body: dict[str, Any] = {"code": code}
    if isinstance(exc, exceptions.ValidationError):
        body["detail"] = _first_message(exc.detail)
        body["errors"] = exc.detail
    else:
        body["detail"] = str(exc.detail)
    response.data = body
    response.status_code = status_code
    return response
