"""File claims, the pre-commit check and the claim-conflict log."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from coordination.api.reference import examples as x
from coordination.api.serializers.base import FieldsBoundOnce, SharedInputFields
from coordination.api.serializers.fields import (
    FenceField,
    IdField,
    ReleaseReasonField,
    StrictBooleanField,
    iso_datetime,
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


@extend_schema_serializer(
    examples=[
        x.sent(
            "two paths, fenced",
            {"issue": x.ISSUE_ID, "paths": x.PATHS, "session": x.SESSION_ID, "fence": x.FENCE},
        )
    ]
)
class FileClaimInput(SharedInputFields, serializers.Serializer):
    issue = IdField()
    paths = path_list(
        help_text="Relative paths, literal after normalisation (invariant 6 (paths are literal)); "
        "one ending in `/` claims the directory and everything under it (invariant 11 (overlap)). "
        "No globs."
    )
    session = IdField(
        required=False,
        allow_null=True,
        help_text="The claiming session; it must be live. Without one, a claim is held "
        "until forced.",
    )
    force = StrictBooleanField(
        required=False,
        default=False,
        help_text="Take the paths from their holders: released overridden, and told.",
    )
    fence = FenceField(help_text="The fence of the issue's lease: claim only while it is current.")


@extend_schema_serializer(
    examples=[
        x.sent("one path", {"issue": x.ISSUE_ID, "paths": x.PATHS[1:], "session": x.SESSION_ID}),
        x.sent("all of the issue's", {"issue": x.ISSUE_ID}),
    ]
)
class FileReleaseInput(SharedInputFields, serializers.Serializer):
    issue = IdField()
    paths = path_list(
        required=False,
        help_text="Without paths: all of the issue's claims. Each releases the claim spelled "
        "so: `src/api/` the directory claim, not the claims under it.",
    )
    session = IdField(required=False, allow_null=True, help_text="Only this session's claims.")


@extend_schema_serializer(examples=[x.shown("a live claim", x.CLAIMS[0])])
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

    def to_representation(self, instance: FileClaim) -> dict[str, Any]:
        # The mapping the fields above render, written out (tests/coordination/api/
        # serializers/test_claim_rendering.py holds it to DRF's): a claim's answer lists
        # up to 1,000 claims, and eight field lookups per claim were most of its cost.
        agent = instance.agent if instance.agent_id is not None else None
        return {
            "id": instance.pk,
            "path": instance.path,
            "issue": instance.issue_id,
            "session": instance.session_id,
            "agent": agent.name if agent is not None else None,
            "claimed_at": iso_datetime(instance.claimed_at),
            "released_at": iso_datetime(instance.released_at),
            "release_reason": instance.release_reason or None,
        }


class HolderSerializer(FieldsBoundOnce, serializers.Serializer):
    path = serializers.CharField(help_text="The requested path.")
    held_path = serializers.CharField(
        help_text="The holder's claim that overlaps it: the path itself, a directory claim "
        "above it, or (for a requested directory) a claim under it."
    )
    issue = serializers.IntegerField()
    session = serializers.IntegerField(allow_null=True)
    agent = serializers.CharField(allow_null=True)


@extend_schema_serializer(
    examples=[
        x.shown(
            "claimed, one reclaimed from a dead holder",
            {"claims": x.CLAIMS, "reclaimed": x.PATHS[1:], "overridden": []},
        )
    ]
)
class ClaimedFilesSerializer(FieldsBoundOnce, serializers.Serializer):
    claims = FileClaimSerializer(many=True)
    reclaimed = serializers.ListField(child=serializers.CharField())
    overridden = HolderSerializer(many=True)


@extend_schema_serializer(examples=[x.shown("released", {"released": x.PATHS})])
class ReleasedFilesSerializer(FieldsBoundOnce, serializers.Serializer):
    released = serializers.ListField(child=serializers.CharField())


@extend_schema_serializer(
    examples=[x.sent("staged paths", {"issue": x.ISSUE_ID, "paths": [*x.PATHS, "README.md"]})]
)
class FileCheckInput(SharedInputFields, serializers.Serializer):
    issue = IdField()
    paths = serializers.ListField(
        child=PathField(),
        min_length=1,
        max_length=file_claims.MAX_CHECK_PATHS,
        help_text="The paths to check, such as a commit's staged paths (names of the tree: "
        "`*`, `?` and `[` are characters here).",
    )


@extend_schema_serializer(
    examples=[
        x.shown("one held elsewhere", {"conflicts": [x.HOLDER]}),
        x.shown("under another issue's directory claim", {"conflicts": [x.DIRECTORY_HOLDER]}),
    ]
)
class FileCheckSerializer(serializers.Serializer):
    conflicts = HolderSerializer(many=True)


@extend_schema_serializer(examples=[x.shown("a refused path", x.CLAIM_CONFLICT)])
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
