"""The landing queue's entries and its calls (docs/api.md, "Landings: a queue that tests
exactly what lands")."""

from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from coordination.api.reference import examples as x
from coordination.api.serializers.fields import FenceField, IdField, StrictCharField
from coordination.models import Landing
from coordination.models.landings import DETAIL_MAX
from coordination.services.landings import MAX_BATCH

BRANCH = r"^[^\s~^:?*\[\\]{1,255}$"  # what git allows in a branch name, roughly
COMMIT = r"^[0-9a-f]{7,64}$"


def commit_field(help_text: str) -> serializers.RegexField:
    return serializers.RegexField(
        COMMIT, max_length=64, help_text=help_text, error_messages={"invalid": "A commit id."}
    )


@extend_schema_serializer(
    examples=[
        x.sent(
            "a branch, under the issue's lease",
            {
                "issue": x.ISSUE_ID,
                "session": x.SESSION_ID,
                "branch": x.LANDING["branch"],
                "commit": x.LANDING["commit"],
                "fence": 4,
            },
        )
    ]
)
class QueueInput(serializers.Serializer):
    issue = IdField(help_text="The issue whose work it is.")
    session = IdField(help_text="The session that holds the issue's lease.")
    branch = serializers.RegexField(BRANCH, help_text="The branch that holds the work.")
    commit = commit_field("The commit to land: the branch's head, 7 to 64 hex digits.")
    fence = FenceField(required=True, allow_null=False, help_text="The issue's lease's fence.")


@extend_schema_serializer(
    examples=[x.sent("a batch of up to four", {"session": 16, "project": "WEB", "max": 4})]
)
class TakeInput(serializers.Serializer):
    session = IdField(help_text="The tester's session: live, of this workspace.")
    project = StrictCharField(max_length=16, help_text="The project's key.")
    max = serializers.IntegerField(
        required=False,
        default=4,
        min_value=1,
        max_value=MAX_BATCH,
        help_text=f"At most this many entries, 1 to {MAX_BATCH} (default 4).",
    )


class TestedInput(serializers.Serializer):
    session = IdField(help_text="The tester's session, which took the batch.")
    fence = FenceField(required=True, allow_null=False, help_text="The batch's fence.")


@extend_schema_serializer(
    examples=[x.sent("landed", {"session": 16, "fence": 12, "commit": x.LANDED["landed_commit"]})]
)
class LandInput(TestedInput):
    commit = commit_field("The commit on the default branch that carries the entry's work.")


@extend_schema_serializer(
    examples=[
        x.sent(
            "the check failed",
            {
                "session": 16,
                "fence": 12,
                "reason": "check_failed",
                "detail": "FAILED tests/test_api.py::test_call - NameError: name 'fetch'",
            },
        )
    ]
)
class RejectInput(TestedInput):
    reason = serializers.ChoiceField(
        choices=[Landing.Reason.CONFLICT, Landing.Reason.CHECK_FAILED],
        help_text="`conflict` (it does not apply) or `check_failed`.",
    )
    detail = StrictCharField(
        required=False,
        default="",
        allow_blank=True,
        trim_whitespace=False,
        max_length=100_000,
        help_text=f"The files, or the check's output's tail (its last {DETAIL_MAX} kept).",
    )


@extend_schema_serializer(examples=[x.sent("the rest of a batch", {"session": 16, "fence": 12})])
class ReturnInput(TestedInput):
    pass


class TesterSerializer(serializers.Serializer):
    session = serializers.IntegerField()
    agent = serializers.CharField(allow_null=True)


@extend_schema_serializer(
    examples=[
        x.shown("queued", x.LANDING),
        x.shown("under test", x.TESTING_LANDING),
        x.shown("landed", x.LANDED),
    ]
)
class LandingSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.key", read_only=True)
    agent = serializers.CharField(source="agent.name", read_only=True, allow_null=True)
    paths = serializers.ListField(child=serializers.CharField(), read_only=True)
    place = serializers.IntegerField(read_only=True, allow_null=True, default=None)
    tester = serializers.SerializerMethodField()

    class Meta:
        model = Landing
        fields = [
            "id",
            "project",
            "issue",
            "session",
            "agent",
            "branch",
            "commit",
            "lease_fence",
            "paths",
            "state",
            "reason",
            "detail",
            "place",
            "fence",
            "tester",
            "landed_commit",
            "queued_at",
            "testing_at",
            "finished_at",
        ]

    @extend_schema_field(TesterSerializer(allow_null=True))
    def get_tester(self, entry: Landing) -> dict[str, Any] | None:
        if entry.tester_id is None:
            return None
        agent = entry.tester_agent.name if entry.tester_agent is not None else None
        return {"session": entry.tester_id, "agent": agent}


class BusySerializer(serializers.Serializer):
    session = serializers.IntegerField()
    agent = serializers.CharField(allow_null=True)
    fence = serializers.IntegerField()


@extend_schema_serializer(
    examples=[
        x.shown("a batch", {"fence": 12, "entries": [x.TESTING_LANDING], "busy": None}),
        x.shown(
            "another tester's batch",
            {
                "fence": None,
                "entries": [],
                "busy": {"session": 16, "agent": "coder-2", "fence": 12},
            },
        ),
    ]
)
class BatchSerializer(serializers.Serializer):
    fence = serializers.IntegerField(allow_null=True)
    entries = LandingSerializer(many=True)
    busy = BusySerializer(allow_null=True)


@extend_schema_serializer(
    examples=[x.shown("two entries back in the queue", {"returned": [32, 33]})]
)
class ReturnedSerializer(serializers.Serializer):
    returned = serializers.ListField(child=serializers.IntegerField())
