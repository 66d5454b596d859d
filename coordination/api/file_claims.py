"""File claims [claim_files, release_files], the pre-commit check and the claim-conflict log."""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from coordination import filtersets, selectors
from coordination.api.base import WorkspaceViewSet, parse
from coordination.api.serializers import (
    FenceField,
    FieldsBoundOnce,
    IdField,
    ReleaseReasonField,
    StrictBooleanField,
)
from coordination.models import ClaimConflict, FileClaim
from coordination.services import file_claims

# --- serializers -----------------------------------------------------------------


@extend_schema_field(OpenApiTypes.STR)
class PathField(serializers.Field):
    """A JSON string, passed on as given: the service normalises it, so that every
    rejected path (empty, control characters, ...) is a 400 that names it."""

    default_error_messages = {"invalid": "A path must be a string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return data

    def to_representation(self, value: str) -> str:
        return value


def path_list(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(
        child=PathField(), min_length=1, max_length=file_claims.MAX_PATHS, **kwargs
    )


class FileClaimInput(serializers.Serializer):
    issue = IdField()
    paths = path_list()
    session = IdField(required=False, allow_null=True)
    force = StrictBooleanField(required=False, default=False)
    fence = FenceField(help_text="The fence of the issue's lease: claim only while it is current.")


class FileReleaseInput(serializers.Serializer):
    issue = IdField()
    paths = path_list(required=False)
    session = IdField(required=False, allow_null=True)


class FileClaimSerializer(FieldsBoundOnce, serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.name", read_only=True, allow_null=True)
    release_reason = ReleaseReasonField()

    class Meta:
        model = FileClaim
        fields = [
            "id",
            "path",
            "issue",
            "session",
            "agent",
            "claimed_at",
            "released_at",
            "release_reason",
        ]


class HolderSerializer(FieldsBoundOnce, serializers.Serializer):
    path = serializers.CharField()
    issue = serializers.IntegerField()
    session = serializers.IntegerField(allow_null=True)
    agent = serializers.CharField(allow_null=True)


class ClaimedFilesSerializer(FieldsBoundOnce, serializers.Serializer):
    claims = FileClaimSerializer(many=True)
    reclaimed = serializers.ListField(child=serializers.CharField())
    overridden = HolderSerializer(many=True)


class ReleasedFilesSerializer(FieldsBoundOnce, serializers.Serializer):
    released = serializers.ListField(child=serializers.CharField())


class FileCheckInput(serializers.Serializer):
    issue = IdField()
    paths = serializers.ListField(
        child=PathField(), min_length=1, max_length=file_claims.MAX_CHECK_PATHS
    )


class FileCheckSerializer(serializers.Serializer):
    conflicts = HolderSerializer(many=True)


class ClaimConflictSerializer(serializers.ModelSerializer):
    rejected_agent = serializers.CharField(
        source="rejected_agent.name", read_only=True, allow_null=True
    )
    holding_agent = serializers.CharField(
        source="holding_agent.name", read_only=True, allow_null=True
    )

    class Meta:
        model = ClaimConflict
        fields = [
            "id",
            "path",
            "rejected_issue",
            "rejected_session",
            "rejected_agent",
            "holding_issue",
            "holding_session",
            "holding_agent",
            "forced",
            "occurred_at",
        ]


# --- viewsets ----------------------------------------------------------------------


class FileClaimViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, WorkspaceViewSet):
    queryset = FileClaim.objects.none()  # the model, for the schema; rows come from get_queryset
    serializer_class = FileClaimSerializer
    filterset_class = filtersets.FileClaimFilter

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.file_claims(self.workspace)

    @extend_schema(
        request=FileClaimInput,
        responses={
            201: ClaimedFilesSerializer,
            409: OpenApiResponse(
                description="file_conflict (+conflicts), session_not_live, stale_fence"
            ),
        },
    )
    def create(self, request: Request) -> Response:
        data = parse(FileClaimInput, request)
        claimed = file_claims.claim_files(
            workspace=self.workspace,
            issue_id=data["issue"],
            paths=data["paths"],
            session_id=data.get("session"),
            force=data["force"],
            fence=data.get("fence"),
        )
        body = ClaimedFilesSerializer(claimed).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=FileReleaseInput, responses=ReleasedFilesSerializer)
    @action(detail=False, methods=["post"])
    def release(self, request: Request) -> Response:
        data = parse(FileReleaseInput, request)
        released = file_claims.release_files(
            workspace=self.workspace,
            issue_id=data["issue"],
            paths=data.get("paths"),
            session_id=data.get("session"),
        )
        return Response(ReleasedFilesSerializer({"released": released}).data)

    @extend_schema(
        request=FileCheckInput,
        responses={
            200: FileCheckSerializer,
            404: OpenApiResponse(description="not_found: the issue is not in this workspace"),
        },
        description=(
            "Which of the paths (1-1000) a claim by this issue would be refused: those held "
            "by another issue's live claim or by a claim with no session. Read-only: it "
            "claims nothing, logs no conflict and reclaims nothing."
        ),
    )
    @action(detail=False, methods=["post"])
    def check(self, request: Request) -> Response:
        data = parse(FileCheckInput, request)
        conflicts = file_claims.check_files(
            workspace=self.workspace, issue_id=data["issue"], paths=data["paths"]
        )
        return Response(FileCheckSerializer({"conflicts": conflicts}).data)


class ClaimConflictViewSet(mixins.ListModelMixin, WorkspaceViewSet):
    queryset = ClaimConflict.objects.none()  # the model, for the schema; rows via get_queryset
    serializer_class = ClaimConflictSerializer
    filterset_class = filtersets.ClaimConflictFilter

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.claim_conflicts(self.workspace)
