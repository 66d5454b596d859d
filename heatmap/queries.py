"""Query parameters of the heatmap and health views, validated once for the API and
the pages alike: a bad mode, depth, date or window is a 400 naming the field."""

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from coordination import selectors as coordination_selectors
from coordination.models import Workspace
from heatmap import selectors
from heatmap.selectors import DEFAULT_DEPTH, MAX_DEPTH, MODES


class WindowQuery(serializers.Serializer):
    """``since <= t < until``; ``until`` defaults to now, ``since`` to a window before it."""

    default_window = timedelta(days=30)

    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        until = data.get("until") or timezone.now()
        since = data.get("since") or until - self.default_window
        if since >= until:
            raise serializers.ValidationError({"since": "since must be earlier than until."})
        return {**data, "since": since, "until": until}


class HeatmapQuery(WindowQuery):
    default_window = timedelta(days=7)

    mode = serializers.ChoiceField(choices=MODES, default="claims")
    project = serializers.CharField(required=False, allow_blank=True, max_length=100)
    prefix = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, max_length=1024
    )
    depth = serializers.IntegerField(min_value=1, max_value=MAX_DEPTH, default=DEFAULT_DEPTH)


def heatmap_arguments(workspace: Workspace, query: dict[str, Any]) -> dict[str, Any]:
    """Validated query → keyword arguments of ``code_heatmap``; an unknown project or
    a prefix that is not a valid path is a domain error (400)."""
    key = query.get("project")
    return {
        "mode": query["mode"],
        "since": query["since"],
        "until": query["until"],
        "project": coordination_selectors.get_project(workspace, key) if key else None,
        "prefix": selectors.normalise_prefix(query.get("prefix")),
        "depth": query["depth"],
    }
