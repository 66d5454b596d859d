"""start_work and finish_work: their bodies and what they answer."""

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from coordination.api.reference import examples as x
from coordination.api.serializers.fields import FenceField, IdField
from coordination.api.serializers.file_claims import FileClaimSerializer, path_list
from coordination.api.serializers.issues import IssueSerializer, ReportSerializer
from coordination.api.serializers.leases import LeaseSerializer
from coordination.api.serializers.messages import MessageSerializer
from coordination.api.serializers.sessions import SessionRegisterInput, SessionSerializer
from coordination.models import Issue


# The register body, plus the issue to lease and the paths to claim. (A comment: the
# schema shows a serializer's docstring as its description.)
@extend_schema_serializer(
    examples=[
        x.sent(
            "issue 7 and its paths",
            {"agent": "coder-1", "role": "backend", "issue": x.ISSUE_ID, "paths": x.PATHS},
        )
    ]
)
class StartWorkInput(SessionRegisterInput):
    issue = IdField(help_text="The issue to lease.")
    paths = path_list(required=False, help_text="The paths to claim for it, all or nothing.")


@extend_schema_serializer(
    examples=[
        x.shown(
            "started",
            {"session": x.SESSION, "lease": x.LEASE, "claims": x.CLAIMS, "message": x.MESSAGE},
        )
    ]
)
class StartedSerializer(serializers.Serializer):
    session = SessionSerializer()
    lease = LeaseSerializer()
    claims = FileClaimSerializer(many=True)
    message = MessageSerializer()


@extend_schema_serializer(
    examples=[
        x.sent(
            "to review, with a report",
            {
                "session": x.SESSION_ID,
                "issue": x.ISSUE_ID,
                "to": "in_review",
                "report": x.REPORT,
                "fence": x.FENCE,
            },
        )
    ]
)
class FinishWorkInput(serializers.Serializer):
    session = IdField()
    issue = IdField()
    to = serializers.ChoiceField(choices=Issue.Status.choices, default=Issue.Status.IN_REVIEW)
    report = ReportSerializer(
        required=False, help_text="Needed to enter in_review or done, unless given before."
    )
    fence = FenceField(help_text="The fence of the issue's lease: finish only while it is current.")


@extend_schema_serializer(
    examples=[
        x.shown(
            "in review, session ended",
            {"issue": x.REVIEWED_ISSUE, "released": x.PATHS, "session": x.ENDED_SESSION},
        )
    ]
)
class FinishedSerializer(serializers.Serializer):
    issue = IssueSerializer()
    released = serializers.ListField(child=serializers.CharField())
    session = SessionSerializer()
