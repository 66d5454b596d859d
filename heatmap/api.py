"""``GET /api/v1/heatmap/`` [get_code_heatmap]: the same aggregation the page draws.

Authentication, the workspace, throttling and the error shape are the API's
defaults (``REST_FRAMEWORK`` in the settings), so nothing here reaches into
``coordination.api``: its default permission puts the caller's workspace on the
request.
"""

from typing import Any

from django import forms
from drf_spectacular.plumbing import build_choice_description_list
from drf_spectacular.utils import OpenApiParameter, extend_schema
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
        parameters=query_parameters(HeatmapForm),
        responses=HeatmapSerializer,
        description="Events per path prefix in a window: file claims (claims mode) or "
        "claim conflicts (contention mode).",
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
