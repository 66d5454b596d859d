"""File claims [claim_files, release_files], the pre-commit check and the claim-conflict log."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from coordination import filtersets, selectors
from coordination.api.base import WorkspaceViewSet, parse
from coordination.api.serializers.file_claims import (
    ClaimConflictSerializer,
    ClaimedFilesSerializer,
    FileCheckInput,
    FileCheckSerializer,
    FileClaimInput,
    FileClaimSerializer,
    FileReleaseInput,
    ReleasedFilesSerializer,
)
from coordination.services import file_claims


class FileClaimViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, WorkspaceViewSet):
    selector = selectors.file_claims
    serializer_class = FileClaimSerializer
    filterset_class = filtersets.FileClaimFilter

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
        conflicts = selectors.check_files(
            workspace=self.workspace, issue_id=data["issue"], paths=data["paths"]
        )
        return Response(FileCheckSerializer({"conflicts": conflicts}).data)


class ClaimConflictViewSet(mixins.ListModelMixin, WorkspaceViewSet):
    selector = selectors.claim_conflicts
    serializer_class = ClaimConflictSerializer
    filterset_class = filtersets.ClaimConflictFilter
