"""Input serializers validate a body; output serializers render a resource."""

from collections.abc import Sequence
from typing import Any

from rest_framework import serializers
from rest_framework.fields import Field, SkipField
from rest_framework.relations import PKOnlyObject

from coordination.models import (
    MAX_ID,
    AgentSession,
    Issue,
    IssueLease,
    Project,
    ReleaseReason,
    WipCapDenial,
)
from coordination.services.workflow import REPORT_LIMITS, missing_for_work


# For output serializers: render with one set of fields per class.
#
# DRF deep-copies a serializer's declared fields (and builds a ModelSerializer's
# from the model) for every instance, then binds them; for a small response that
# is most of the rendering time (a session: 0.19 ms, 0.035 ms with fields bound
# once; ten file claims: 0.42 ms, 0.22 ms). Rendering only reads the bound fields,
# so one set serves every response in every thread. The loop is DRF's
# ``Serializer.to_representation``. Output serializers only: validation would run
# through the per-instance fields. (A comment, not a docstring: the schema would show
# a docstring as the description of every serializer that mixes this in.)
class FieldsBoundOnce:
    @classmethod
    def bound_fields(cls) -> Sequence[Field]:
        fields = cls.__dict__.get("_bound_fields")
        if fields is None:
            readable = cls().fields.values()  # type: ignore[attr-defined]
            fields = [field for field in readable if not field.write_only]
            cls._bound_fields = fields  # type: ignore[attr-defined]
        return fields

    def to_representation(self, instance: Any) -> dict[str, Any]:
        rendered: dict[str, Any] = {}
        for field in self.bound_fields():
            try:
                attribute = field.get_attribute(instance)
            except SkipField:
                continue
            value = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
            rendered[str(field.field_name)] = (
                None if value is None else field.to_representation(attribute)
            )
        return rendered


class IdField(serializers.IntegerField):
    """A row id: positive and within bigint, so a huge number is a 400, not a DB error."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(**kwargs)


class FenceField(serializers.IntegerField):
    """An optional fence (API.md, "Fences"): a positive JSON integer within the
    column's range; ``"3"``, ``3.0`` or ``true`` are type errors, not fences. ``null``
    is the same as no fence."""

    MAX = 2**31 - 1

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", self.MAX)
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true/false: ``"yes"`` or ``1`` are type errors, not booleans."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictCharField(serializers.CharField):
    """Only JSON strings: a number or a list is a type error, not coerced to text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictChoiceField(serializers.ChoiceField):
    """A choice given as its JSON type: ``"1"`` is not the priority 1."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, int | str):
            self.fail("invalid_choice", input=data)
        if isinstance(data, str) and any(isinstance(key, int) for key in self.choices):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class SlugRefField(StrictCharField):
    """A reference by slug/name to another row of the workspace; resolved by services."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 100)
        super().__init__(**kwargs)


# --- sessions ---------------------------------------------------------------


class SessionRegisterInput(serializers.Serializer):
    agent = StrictCharField(max_length=100)
    role = StrictCharField(max_length=100, required=False, allow_blank=True)
    department = StrictCharField(max_length=100, required=False, allow_blank=True)
    worktree = SlugRefField(required=False)


class SessionRefInput(serializers.Serializer):
    session = IdField()


class LeaseReleaseInput(SessionRefInput):
    fence = FenceField(help_text="The lease's fence: release only while it is current.")


class SessionSerializer(FieldsBoundOnce, serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.name")
    role = serializers.CharField(source="agent.role")
    department = serializers.CharField(source="agent.department")
    worktree = serializers.CharField(source="agent.worktree.slug", read_only=True, allow_null=True)
    live = serializers.BooleanField(source="is_live")

    class Meta:
        model = AgentSession
        fields = [
            "id",
            "agent",
            "role",
            "department",
            "worktree",
            "status",
            "live",
            "started_at",
            "last_heartbeat_at",
            "ended_at",
        ]


# --- leases -----------------------------------------------------------------


class BlankAsNullChoiceField(serializers.ChoiceField):
    """A choice column stored blank when it has no value; the API says ``null``."""

    def __init__(self, choices: Any, **kwargs: Any) -> None:
        super().__init__(choices=choices, allow_null=True, read_only=True, **kwargs)

    def to_representation(self, value: Any) -> Any:
        return value or None


class ReleaseReasonField(BlankAsNullChoiceField):
    """Blank while unreleased: ``null`` then, like ``released_at``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(ReleaseReason.choices, **kwargs)


class LeaseSerializer(FieldsBoundOnce, serializers.ModelSerializer):
    agent = serializers.CharField(source="agent.name", read_only=True, allow_null=True)
    live = serializers.BooleanField(source="is_live")
    release_reason = ReleaseReasonField()
    fence = serializers.IntegerField(read_only=True)

    class Meta:
        model = IssueLease
        fields = [
            "id",
            "issue",
            "session",
            "agent",
            "acquired_at",
            "released_at",
            "release_reason",
            "live",
            "fence",
        ]


# --- projects, issues, workflow ----------------------------------------------


class ProjectInput(serializers.Serializer):
    key = serializers.SlugField(max_length=32)
    name = StrictCharField(max_length=200)
    agent_wip_limit = serializers.IntegerField(min_value=1, max_value=100_000, required=False)
    primary_worktree = SlugRefField(required=False, allow_null=True)


class ProjectSerializer(serializers.ModelSerializer):
    primary_worktree = serializers.CharField(
        source="primary_worktree.slug", read_only=True, allow_null=True
    )

    class Meta:
        model = Project
        fields = ["id", "key", "name", "agent_wip_limit", "primary_worktree", "created_at"]


class IssueInput(serializers.Serializer):
    project = SlugRefField(max_length=32)
    title = StrictCharField(max_length=300)
    description = StrictCharField(required=False, allow_blank=True, max_length=100_000)
    status = serializers.ChoiceField(choices=Issue.Status.choices, required=False)
    priority = StrictChoiceField(choices=Issue.Priority.choices, required=False)
    requires_filesystem = StrictBooleanField(required=False)
    worktree = SlugRefField(required=False, allow_null=True)
    assignee = SlugRefField(required=False, allow_null=True)

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
    to = serializers.ChoiceField(choices=Issue.Status.choices)
    report = ReportSerializer(required=False)


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
        unreleased = getattr(issue, "unreleased_leases", None)
        if unreleased is None:  # not fetched through selectors.issues()
            unreleased = list(IssueLease.objects.unreleased().with_live().filter(issue=issue))
        return LeaseSerializer(unreleased[0]).data if unreleased else None


class ReadyQuery(serializers.Serializer):
    project = SlugRefField(required=False, max_length=32)
    include_not_ready = serializers.BooleanField(required=False, default=False)

    def to_internal_value(self, data: Any) -> Any:
        flag = data.get("include_not_ready")
        if flag is not None and str(flag).lower() not in {"true", "false", "1", "0"}:
            raise serializers.ValidationError({"include_not_ready": "Use true or false."})
        return super().to_internal_value(data)


class QueuedIssueSerializer(IssueSerializer):
    """An issue of the ready queue; with ``include_not_ready``, what it lacks."""

    missing = serializers.SerializerMethodField()

    class Meta(IssueSerializer.Meta):
        fields = [*IssueSerializer.Meta.fields, "missing"]

    def get_missing(self, issue: Issue) -> list[str]:
        return missing_for_work(issue)


class WipCapDenialSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.key", read_only=True, allow_null=True)
    agent = serializers.CharField(source="agent.name", read_only=True, allow_null=True)

    class Meta:
        model = WipCapDenial
        fields = ["id", "project", "issue", "session", "agent", "limit", "occurred_at"]


class WorkflowSerializer(serializers.Serializer):
    """The shape of ``workflow.get_workflow()``, for the schema."""

    states = serializers.ListField(child=serializers.CharField())
    transitions = serializers.ListField(child=serializers.DictField())
    definition_of_ready = serializers.ListField(child=serializers.DictField())
    gates = serializers.ListField(child=serializers.DictField())
    report = serializers.DictField()
