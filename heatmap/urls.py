"""The managers' pages, and the heatmap's API route (both included from
projektor/urls.py, the API's under ``/api/v1/``)."""

from django.urls import path

from heatmap import views
from heatmap.api import HeatmapView

urlpatterns = [
    path("", views.home, name="home"),
    path("workspaces/", views.workspace_list, name="workspaces"),
    path("workspaces/<slug:slug>/heatmap/", views.heatmap_page, name="heatmap"),
    path("workspaces/<slug:slug>/health/", views.health_page, name="health"),
]

# Named like the page: ``reverse("heatmap")`` is this route, with a slug the page.
api_urlpatterns = [
    path("heatmap/", HeatmapView.as_view(), name="heatmap"),
]
