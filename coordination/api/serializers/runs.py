"""Worktrees and runs: bodies, and the worktree and run as shown."""

from django.core.validators import validate_slug
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from coordination.api.reference import examples as x
from coordination.api.serializers.fields import (
    BlankAsNullChoiceField,
    FenceField,
    IdField,
    StrictBooleanField,
    StrictCharField,
)
from coordination.models import Run, Worktree


@extend_schema_serializer(
    examples=[
        x.sent("the main checkout", {k: x.WORKTREE[k] for k in ("slug", "name", "path", "branch")})
    ]
)
class WorktreeInput(serializers.Serializer):
    slug = StrictCharField(max_length=64, validators=[validate_slug])
    name = StrictCharField(max_length=200)
    path = StrictCharField(
        max_length=1024, required=False, allow_blank=True, help_text="Where it is checked out."
    )
    branch = StrictCharField(max_length=200, required=False, allow_blank=True)


@extend_schema_serializer(examples=[x.shown("the main checkout", x.WORKTREE)])
class WorktreeSerializer(serializers.ModelSerializer):
    class Meta:
        model = Worktree
        fields = ["id", "slug", "name", "path", "branch", "created_at"]


@extend_schema_serializer(
    examples=[x.sent("issue 7 for session 12", {"session": x.SESSION_ID, "issue": x.ISSUE_ID})]
)
class RunDispatchInput(serializers.Serializer):
    session = IdField(help_text="The session that runs it; it must be live.")
    issue = IdField(help_text="The issue to run; its lease is taken if the session lacks it.")
    primary_worktree = StrictBooleanField(
        required=False,
        default=False,
        help_text="Lock the project's primary worktree, whatever the issue and the agent "
        "name: work on the main checkout, such as integrating the issue's branch (400 when "
        "the project has none).",
    )


@extend_schema_serializer(
    examples=[x.sent("succeeded, fenced", {"outcome": "succeeded", "fence": x.RUN["fence"]})]
)
class RunFinishInput(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=[Run.Status.SUCCEEDED, Run.Status.FAILED])
    fence = FenceField(
        help_text="The fence of the run's worktree lock: finish only while it is current."
    )


@extend_schema_serializer(examples=[x.shown("a running run", x.RUN)])
class RunSerializer(serializers.ModelSerializer):
    worktree = serializers.CharField(source="worktree.slug", read_only=True, allow_null=True)
    error = BlankAsNullChoiceField(Run.Error.choices)
    live = serializers.BooleanField(source="is_live", read_only=True)
    # The fence of its worktree lock, annotated by selectors.runs(): no query per run.
    fence = serializers.IntegerField(source="lock_fence", read_only=True, allow_null=True)

    class Meta:
        model = Run
        fields = [
            "id",
            "issue",
            "session",
            "lock_mode",
            "worktree",
            "fence",
            "status",
            "live",
            "error",
            "started_at",
            "finished_at",
        ]
