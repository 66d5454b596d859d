"""File claims [claim_files, release_files], the pre-commit check and the claim-conflict log."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from coordination.api.base import FilteredListViewSet, parse
from coordination.api.reference import refusals as r
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
from coordination.filtersets import ClaimConflictFilter, FileClaimFilter
from coordination.selectors import claims
from coordination.services import file_claims


@extend_schema(tags=["File claims"])
@extend_schema_view(
    list=extend_schema(
        summary="List file claims",
        description="Newest first. `active=true` keeps the unreleased ones; `path` matches "
        "the normalised path exactly (`src/api/` is the directory claim), `path_prefix` by "
        "whole segments (`src` and `src/` select `src`, `src/` and `src/a.py`, not "
        "`srcs/b.py`); `covering` keeps the unreleased claims that hold a path: the path "
        "itself and each directory claim above it. Read-only.",
    ),
    retrieve=extend_schema(
        summary="Get a file claim",
        description="One claim, released or not (with its reason, invariant 7 (release reasons)), "
        "and its holder session and agent.",
    ),
)
class FileClaimViewSet(mixins.RetrieveModelMixin, FilteredListViewSet):
    selector = claims.file_claims
    list_selector = claims.file_claim_list
    serializer_class = FileClaimSerializer
    filterset_class = FileClaimFilter

    @extend_schema(
        summary="Claim files for an issue",
        description="Claims every path for the issue, or none (invariant 5 (all-or-nothing)). "
        "Paths come back normalised and sorted, literal after normalisation "
        "(invariant 6 (paths are literal)); a path ending in `/` is a directory claim, holding "
        "everything under it, and a glob (`*`, `?`, `[`) is a 400 (invariant 11 (overlap)). A "
        "path this issue holds already is kept; an overlapping claim of a dead holder is "
        "reclaimed `expired` and listed in `reclaimed` (invariant 4 (stale reclaim)). A claim of "
        "another issue that overlaps a path (the same path, a directory claim above it, or a "
        "claim under a requested directory) whose holder is live, or that has no session, is a "
        "conflict: without `force` the whole request is refused and every (path, holder) pair "
        "logged in /claim-conflicts/ at the deeper path (invariant 8 (append-only logs)); with "
        "`force` the holders are released `overridden`, listed in `overridden` and told by "
        "message. With `fence`, only while that lease is the issue's current one.",
        request=FileClaimInput,
        responses={
            201: ClaimedFilesSerializer,
            **r.errors(
                r.ISSUE_NOT_FOUND,
                r.FILE_CONFLICT,
                r.SESSION_NOT_LIVE,
                r.ISSUE_CLOSED,
                r.STALE_FENCE,
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

    @extend_schema(
        summary="Release file claims",
        description="Releases the issue's claims as `released` (invariant 7 (release reasons)): on "
        "`paths`, or all of them without; with `session`, only that session's. A path releases the "
        "claim spelled so (`src/api/` the directory claim, never the claims under it). Paths the "
        "issue does not hold are ignored; `released` lists those that were.",
        request=FileReleaseInput,
        responses={200: ReleasedFilesSerializer, **r.errors(r.ISSUE_NOT_FOUND)},
    )
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
        summary="Check paths against the live claims",
        description="Which of the paths (1-1000) a claim by this issue would be refused: each "
        "(path, holder) pair where another issue's live claim, or a claim with no session, "
        "overlaps the path (the path itself, a directory claim above it, or a claim under a "
        "directory asked about; invariant 11 (overlap)). Read-only: it claims nothing, logs no "
        "conflict and reclaims nothing. The pre-commit guard (GET /guard/pre-commit) sends it "
        "every staged path.",
        request=FileCheckInput,
        responses={200: FileCheckSerializer, **r.errors(r.ISSUE_NOT_FOUND)},
    )
    @action(detail=False, methods=["post"])
    def check(self, request: Request) -> Response:
        data = parse(FileCheckInput, request)
        conflicts = file_claims.check_files(
            workspace=self.workspace, issue_id=data["issue"], paths=data["paths"]
        )
        return Response(FileCheckSerializer({"conflicts": conflicts}).data)


@extend_schema(tags=["Contention logs"])
@extend_schema_view(
    list=extend_schema(
        summary="List claim conflicts",
        description="Every path a file claim was refused on (`forced=false`) or took by force "
        "(`forced=true`), with both sides, newest first (invariant 5 (all-or-nothing)): "
        "append-only, never updated or deleted (invariant 8 (append-only logs)). `issue` matches "
        "either side. Read-only.",
    ),
)
class ClaimConflictViewSet(FilteredListViewSet):
    selector = claims.claim_conflicts
    list_selector = claims.claim_conflict_list
    serializer_class = ClaimConflictSerializer
    filterset_class = ClaimConflictFilter
