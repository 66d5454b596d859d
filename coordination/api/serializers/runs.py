"""Worktrees and runs: bodies, and the worktree and run as shown."""

from django.core.validators import validate_slug
from rest_framework import serializers

from coordination.api.serializers.fields import (
    BlankAsNullChoiceField,
    FenceField,
    IdField,
    StrictCharField,
)
from coordination.models import Run, Worktree


class WorktreeInput(serializers.Serializer):
    slug = StrictCharField(max_length=64, validators=[validate_slug])
    name = StrictCharField(max_length=200)
    path = StrictCharField(max_length=1024, required=False, allow_blank=True)
    branch = StrictCharField(max_length=200, required=False, allow_blank=True)


class WorktreeSerializer(serializers.ModelSerializer):
    class Meta:
        model = Worktree
        fields = ["id", "slug", "name", "path", "branch", "created_at"]


class RunDispatchInput(serializers.Serializer):
    session = IdField()
    issue = IdField()


class RunFinishInput(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=[Run.Status.SUCCEEDED, Run.Status.FAILED])
    fence = FenceField(
        help_text="The fence of the run's worktree lock: finish only while it is current."
    )


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
