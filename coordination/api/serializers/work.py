"""start_work and finish_work: their bodies and what they answer."""

from rest_framework import serializers

from coordination.api.serializers.fields import FenceField, IdField
from coordination.api.serializers.file_claims import FileClaimSerializer, path_list
from coordination.api.serializers.issues import IssueSerializer, ReportSerializer
from coordination.api.serializers.leases import LeaseSerializer
from coordination.api.serializers.messages import MessageSerializer
from coordination.api.serializers.sessions import SessionRegisterInput, SessionSerializer
from coordination.models import Issue


# The register body, plus the issue to lease and the paths to claim. (A comment: the
# schema shows a serializer's docstring as its description.)
class StartWorkInput(SessionRegisterInput):
    issue = IdField()
    paths = path_list(required=False)


class StartedSerializer(serializers.Serializer):
    session = SessionSerializer()
    lease = LeaseSerializer()
    claims = FileClaimSerializer(many=True)
    message = MessageSerializer()


class FinishWorkInput(serializers.Serializer):
    session = IdField()
    issue = IdField()
    to = serializers.ChoiceField(choices=Issue.Status.choices, default=Issue.Status.IN_REVIEW)
    report = ReportSerializer(required=False)
    fence = FenceField(help_text="The fence of the issue's lease: finish only while it is current.")


class FinishedSerializer(serializers.Serializer):
    issue = IssueSerializer()
    released = serializers.ListField(child=serializers.CharField())
    session = SessionSerializer()
