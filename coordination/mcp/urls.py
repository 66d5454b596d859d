"""``/mcp``: the MCP endpoint; included from projektor/urls.py."""

from django.urls import path

from coordination.mcp.views import McpView

urlpatterns = [path("", McpView.as_view(), name="mcp")]
