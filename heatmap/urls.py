"""The managers' pages, and the heatmap's API route (both included from
projektor/urls.py, the API's under ``/api/v1/``)."""

from django.urls import path

from heatmap import story_views, views
from heatmap.api import HeatmapView

urlpatterns = [
    path("", views.home, name="home"),
    path("workspaces/", views.workspace_list, name="workspaces"),
    path("workspaces/<slug:slug>/heatmap/", views.heatmap_page, name="heatmap"),
    path("workspaces/<slug:slug>/health/", views.health_page, name="health"),
    path("workspaces/<slug:slug>/issues/", story_views.board_page, name="board"),
    path("workspaces/<slug:slug>/issues/<int:issue_id>/", story_views.issue_page, name="issue"),
    path("workspaces/<slug:slug>/agents/<path:name>/", story_views.agent_page, name="agent"),
    path("workspaces/<slug:slug>/paths/", story_views.path_page, name="path"),
]

# Named like the page: ``reverse("heatmap")`` is this route, with a slug the page.
api_urlpatterns = [
    path("heatmap/", HeatmapView.as_view(), name="heatmap"),
]
