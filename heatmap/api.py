"""``GET /api/v1/heatmap/`` [get_code_heatmap]: the same aggregation the page draws."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from coordination.api.auth import workspace_of
from heatmap import selectors
from heatmap.queries import HeatmapQuery, heatmap_arguments
from heatmap.selectors import MODES


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
        parameters=[HeatmapQuery],
        responses=HeatmapSerializer,
        description="Events per path prefix in a window: file claims (claims mode) or "
        "claim conflicts (contention mode).",
    )
    def get(self, request: Request) -> Response:
        query = HeatmapQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        workspace = workspace_of(request)
        heatmap = selectors.code_heatmap(
            workspace, **heatmap_arguments(workspace, query.validated_data)
        )
        return Response(HeatmapSerializer(heatmap.as_dict()).data)
