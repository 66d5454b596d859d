"""File claims, the pre-commit check and the claim-conflict log."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from coordination.api.serializers.base import FieldsBoundOnce
from coordination.api.serializers.fields import (
    FenceField,
    IdField,
    ReleaseReasonField,
    StrictBooleanField,
)
from coordination.models import ClaimConflict, FileClaim
from coordination.services import file_claims


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
