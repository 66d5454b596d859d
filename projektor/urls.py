from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from django.views.generic import RedirectView

from coordination.api.reference.views import PublicDocsView, PublicSchemaView
from coordination.guard import urls as guard_urls
from heatmap import urls as heatmap_urls
from projektor.middleware import wants_json

FAVICON = "coordination/favicon.ico"  # a static file, served by WhiteNoise

urlpatterns = [
    # The API first: the agents' calls are most of the traffic, and Django tries the
    # patterns in order (no pattern below matches under api/v1/ but the catch-all).
    path("api/v1/schema/", PublicSchemaView.as_view(), name="schema"),
    path("api/v1/docs/", PublicDocsView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include("coordination.api.urls")),
    path("api/v1/", include(heatmap_urls.api_urlpatterns)),
    path("", include("projektor.operations.urls")),  # /healthz, /readyz, /metrics
    path("", include(heatmap_urls.urlpatterns)),  # the managers' pages
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Browsers ask for /favicon.ico on pages that name no icon (the admin, JSON answers).
    path("favicon.ico", RedirectView.as_view(url=static(FAVICON)), name="favicon"),
    path("admin/", admin.site.urls),
    path("guard/", include("coordination.guard.urls")),
    path("agent/", include(guard_urls.agent_urlpatterns)),  # the `projektor` command
    path("mcp", include("coordination.mcp.urls")),  # MCP for agents: API key, no CSRF
    # Any other /api/ URL answers JSON too, never Django's HTML page (even with DEBUG),
    # for every method: agents send no CSRF cookie, and there is nothing here to protect.
    re_path(r"^api/", csrf_exempt(lambda request: api_not_found(request))),
]


def api_not_found(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"code": "not_found", "detail": "No such endpoint."}, status=404)


# A Host outside ALLOWED_HOSTS (DisallowedHost) and other requests Django refuses as
# suspicious answer JSON where the answer is JSON (the API, /mcp, the probes) too.
def handler400(request: HttpRequest, exception: Exception) -> HttpResponse:
    if wants_json(request):
        detail = "Bad request."
        if isinstance(exception, DisallowedHost):
            detail = "The Host header names no host this server answers for (ALLOWED_HOSTS)."
        return JsonResponse({"code": "invalid", "detail": detail}, status=400)
    return defaults.bad_request(request, exception)


# A crash where answers are JSON still answers JSON; the error itself is logged by Django.
def handler500(request: HttpRequest) -> HttpResponse:
    if wants_json(request):
        return JsonResponse(
            {"code": "server_error", "detail": "Internal error; it has been logged."}, status=500
        )
    return defaults.server_error(request)
