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
from coordination.api.serializers.file_claims import PathField
from coordination.api.serializers.leases import LeaseSerializer
from coordination.api.serializers.links import CollisionSerializer, GraphFields
from coordination.models import Issue
from coordination.selectors.graph import graph_of
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
        required=False, help_text="A run of it needs a worktree (invariant 10 (lock mode per run))."
    )
    worktree = SlugRefField(
        required=False, allow_null=True, help_text="A worktree's slug: its runs lock that one."
    )
    assignee = SlugRefField(required=False, allow_null=True, help_text="An agent's name.")
    paths = serializers.ListField(
        child=PathField(),
        required=False,
        help_text="The files and directories the work is expected to touch (at most 100, "
        "normalised like claims; no globs): start_work without paths claims them, and the "
        "ready queue names those a live claim holds.",
    )

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
class IssueSerializer(FieldsBoundOnce, GraphFields, serializers.ModelSerializer):
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
            "blocked_by",
            "blocks",
            "parent",
            "children",
            "links",
            "paths",
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

    avoid_collisions = serializers.BooleanField(
        required=False,
        default=True,
        help_text="Within a priority, issues whose expected paths no live claim holds come "
        "first; false keeps the plain order.",
    )
    free = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Only the issues none of whose expected paths a live claim holds.",
    )

    FLAGS = ("include_not_ready", "avoid_collisions", "free")

    def to_internal_value(self, data: Any) -> Any:
        for name in self.FLAGS:
            flag = data.get(name)
            if flag is not None and str(flag).lower() not in {"true", "false", "1", "0"}:
                raise serializers.ValidationError({name: "Use true or false."})
        return super().to_internal_value(data)


@extend_schema_serializer(examples=[x.shown("a ready issue", x.READY_ISSUE)])
class QueuedIssueSerializer(IssueSerializer):
    """An issue of the ready queue: the expected paths a live claim holds now and,
    with ``include_not_ready``, what it lacks (``blockers`` while it is blocked)."""

    missing = serializers.SerializerMethodField()
    collisions = serializers.SerializerMethodField()

    class Meta(IssueSerializer.Meta):
        fields = [*IssueSerializer.Meta.fields, "missing", "collisions"]

    def get_missing(self, issue: Issue) -> list[str]:
        blocked = ["blockers"] if graph_of(issue).blocked_by else []
        return [*missing_for_work(issue), *blocked]

    def get_collisions(self, issue: Issue) -> list[dict[str, Any]]:
        return CollisionSerializer(graph_of(issue).collisions, many=True).data  # type: ignore[return-value]


@extend_schema_serializer(examples=[x.shown("the workflow", x.WORKFLOW)])
class WorkflowSerializer(serializers.Serializer):
    """The shape of ``workflow.get_workflow()``, for the schema."""

    states = serializers.ListField(child=serializers.CharField())
    transitions = serializers.ListField(child=serializers.DictField())
    definition_of_ready = serializers.ListField(child=serializers.DictField())
    gates = serializers.ListField(child=serializers.DictField())
    report = serializers.DictField()
