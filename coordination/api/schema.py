"""The OpenAPI schema and docs: the bearer API-key scheme, and the public views."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import get_lib_doc_excludes
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "coordination.api.auth.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "A workspace API key."}


def lib_doc_excludes() -> list[type]:
    """DRF's classes and FieldsBoundOnce: a serializer without a docstring of its own
    has no description, not the mixin's."""
    from coordination.api.serializers.base import FieldsBoundOnce

    return [*get_lib_doc_excludes(), FieldsBoundOnce]


class PublicDocsMixin(APIView):
    """The schema and the docs are public: no key is checked (a wrong one is not a
    401 here), but they are throttled per address like any anonymous request, and
    a refusal answers in the API's JSON error shape, not as text under HTML."""

    authentication_classes = []
    permission_classes = [AllowAny]

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        request = self.request
        request.accepted_renderer, request.accepted_media_type = JSONRenderer(), "application/json"
        return response


class PublicSchemaView(PublicDocsMixin, SpectacularAPIView):
    pass


class PublicDocsView(PublicDocsMixin, SpectacularSwaggerView):
    pass
