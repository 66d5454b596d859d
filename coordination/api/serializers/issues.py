"""Issues, the ready queue and the workflow: bodies, and the issue as shown."""

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from coordination.api.reference import examples as x
from coordination.api.serializers.base import FieldsBoundOnce
from coordination.api.serializers.fields import (
    SlugRefField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
)
from coordination.api.serializers.leases import LeaseSerializer
from coordination.models import Issue
from coordination.services.workflow import REPORT_LIMITS, missing_for_work


class IssueInput(serializers.Serializer):
    project = SlugRefField(max_length=32, help_text="The project's key; it cannot change.")
    title = StrictCharField(max_length=300)
    description = StrictCharField(
        required=False, allow_blank=True, max_length=100_000, help_text="What done means."
    )
    status = serializers.ChoiceField(
        choices=Issue.Status.choices,
        required=False,
        help_text="On creation only: backlog (the default) or todo, if the issue is ready.",
    )
    priority = StrictChoiceField(choices=Issue.Priority.choices, required=False)
    requires_filesystem = StrictBooleanField(
        required=False, help_text="A run of it needs a worktree (invariant 10)."
    )
    worktree = SlugRefField(
        required=False, allow_null=True, help_text="A worktree's slug: its runs lock that one."
    )
    assignee = SlugRefField(required=False, allow_null=True, help_text="An agent's name.")

    NOT_PATCHABLE = {
        "status": "Status changes only through POST /issues/{id}/transition/.",
        "project": "An issue cannot move to another project.",
    }

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if self.partial:
            refused = {f: msg for f, msg in self.NOT_PATCHABLE.items() if f in self.initial_data}
            if refused:
                raise serializers.ValidationError(refused)
        return attrs


class ReportSerializer(serializers.Serializer):
    """A completion report: what was done, how it was verified, where to look."""

    summary = StrictCharField(max_length=REPORT_LIMITS["summary"])
    verification = StrictCharField(max_length=REPORT_LIMITS["verification"])
    pr_link = serializers.URLField(required=False, max_length=REPORT_LIMITS["pr_link"])


class TransitionInput(serializers.Serializer):
    to = serializers.ChoiceField(choices=Issue.Status.choices, help_text="The status to enter.")
    report = ReportSerializer(
        required=False,
        help_text="Needed to enter in_review or done if the issue was ever leased; kept on "
        "the issue and posted to it.",
    )


@extend_schema_serializer(examples=[x.shown("an issue in progress", x.ISSUE)])
class IssueSerializer(FieldsBoundOnce, serializers.ModelSerializer):
    project = serializers.CharField(source="project.key", read_only=True, allow_null=True)
    worktree = serializers.CharField(source="worktree.slug", read_only=True, allow_null=True)
    assignee = serializers.CharField(source="assignee.name", read_only=True, allow_null=True)
    lease = serializers.SerializerMethodField()
    report = ReportSerializer(allow_null=True, read_only=True)

    class Meta:
        model = Issue
        fields = [
            "id",
            "project",
            "title",
            "description",
            "status",
            "priority",
            "requires_filesystem",
            "worktree",
            "assignee",
            "lease",
            "report",
            "created_at",
            "updated_at",
        ]

    def get_lease(self, issue: Issue) -> dict[str, Any] | None:
        # Prefetched by selectors.issues(): rendering a list of issues costs no query.
        unreleased = issue.unreleased_leases  # type: ignore[attr-defined]
        return LeaseSerializer(unreleased[0]).data if unreleased else None


class ReadyQuery(serializers.Serializer):
    project = SlugRefField(required=False, max_length=32, help_text="A project's key.")
    include_not_ready = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Then the other open issues without a live lease follow, each with what "
        "it lacks in missing.",
    )

    def to_internal_value(self, data: Any) -> Any:
        flag = data.get("include_not_ready")
        if flag is not None and str(flag).lower() not in {"true", "false", "1", "0"}:
            raise serializers.ValidationError({"include_not_ready": "Use true or false."})
        return super().to_internal_value(data)


@extend_schema_serializer(examples=[x.shown("a ready issue", x.READY_ISSUE)])
class QueuedIssueSerializer(IssueSerializer):
    """An issue of the ready queue; with ``include_not_ready``, what it lacks."""

    missing = serializers.SerializerMethodField()

    class Meta(IssueSerializer.Meta):
        fields = [*IssueSerializer.Meta.fields, "missing"]

    def get_missing(self, issue: Issue) -> list[str]:
        return missing_for_work(issue)


@extend_schema_serializer(examples=[x.shown("the workflow", x.WORKFLOW)])
class WorkflowSerializer(serializers.Serializer):
    """The shape of ``workflow.get_workflow()``, for the schema."""

    states = serializers.ListField(child=serializers.CharField())
    transitions = serializers.ListField(child=serializers.DictField())
    definition_of_ready = serializers.ListField(child=serializers.DictField())
    gates = serializers.ListField(child=serializers.DictField())
    report = serializers.DictField()
