"""The reference's public views: the schema at /api/v1/schema/ and the docs at
/api/v1/docs/."""

from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView


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
