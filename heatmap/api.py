"""``GET /api/v1/heatmap/`` [get_code_heatmap]: the same aggregation the page draws.

Authentication, the workspace, throttling and the error shape are the API's
defaults (``REST_FRAMEWORK`` in the settings), so nothing here reaches into
``coordination.api``: its default permission puts the caller's workspace on the
request.
"""

from typing import Any

from django import forms
from drf_spectacular.plumbing import build_choice_description_list
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from coordination.models import Workspace
from heatmap import selectors
from heatmap.forms import HeatmapForm
from heatmap.selectors import MODES


def query_parameters(form: type[forms.Form]) -> list[OpenApiParameter]:
    """The form's fields as query parameters: the schema says what the form accepts."""
    parameters = []
    for name, field in form.base_fields.items():
        description = ""
        schema: dict[str, Any]
        if isinstance(field, forms.DateTimeField):
            schema = {"type": "string", "format": "date-time"}
        elif isinstance(field, forms.IntegerField):
            schema = {"type": "integer", "maximum": field.max_value, "minimum": field.min_value}
        elif isinstance(field, forms.ChoiceField):
            choices = list(field.choices)  # type: ignore[arg-type]
            schema = {"enum": [value for value, _ in choices], "type": "string", "minLength": 1}
            description = build_choice_description_list(choices)
        else:
            schema = {"type": "string", "maxLength": getattr(field, "max_length", None)}
        schema["default"] = field.initial
        schema = {key: value for key, value in schema.items() if value is not None}
        parameters.append(OpenApiParameter(name, schema, description=description))
    return parameters


class HeatmapNodeSerializer(serializers.Serializer):
    path = serializers.CharField()
    count = serializers.IntegerField()
    depth = serializers.IntegerField()


class HeatmapSerializer(serializers.Serializer):
    mode = serializers.ChoiceField(choices=MODES)
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    prefix = serializers.CharField()
    depth = serializers.IntegerField()
    total = serializers.IntegerField()
    nodes = HeatmapNodeSerializer(many=True)


class HeatmapView(APIView):
    @extend_schema(
        tags=["Heatmap"],
        summary="Get the code heatmap",
        description="Events per path prefix in a window (default: the 7 days to now): file "
        "claims made (`mode=claims`, by claim time, released or not) or claim conflicts "
        "(`mode=contention`, forced or not). Each node is a prefix under `prefix`, up to "
        "`depth` segments deeper, prefixes matching whole segments; nodes by count, "
        "descending; `total` counts the events under `prefix`. `project` filters by the "
        "claiming issue's project. The same figures as the heatmap page. Read-only.",
        parameters=query_parameters(HeatmapForm),
        responses=HeatmapSerializer,
        examples=[
            OpenApiExample(
                "where agents worked this week",
                response_only=True,
                value={
                    "mode": "claims",
                    "since": "2026-02-23T09:00:00Z",
                    "until": "2026-03-02T09:00:00Z",
                    "prefix": "src",
                    "depth": 2,
                    "total": 57,
                    "nodes": [
                        {"path": "src/webhooks", "count": 31, "depth": 1},
                        {"path": "src/billing", "count": 26, "depth": 1},
                        {"path": "src/webhooks/retry.py", "count": 18, "depth": 2},
                    ],
                },
            )
        ],
    )
    def get(self, request: Request) -> Response:
        query = HeatmapForm(request.query_params)
        if not query.is_valid():
            errors = query.errors.get_json_data()
            raise serializers.ValidationError(
                {field: [error["message"] for error in found] for field, found in errors.items()}
            )
        workspace: Workspace = request.workspace  # type: ignore[attr-defined]
        heatmap = selectors.code_heatmap(workspace, **query.heatmap_arguments(workspace))
        return Response(HeatmapSerializer(heatmap.as_dict()).data)
