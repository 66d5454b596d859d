"""Input serializers validate a body; output serializers render a resource.

One module per resource; every name is importable from here too.
"""

from coordination.api.serializers.base import FieldsBoundOnce
from coordination.api.serializers.fields import (
    BlankAsNullChoiceField,
    FenceField,
    IdField,
    ReleaseReasonField,
    SlugRefField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
)
from coordination.api.serializers.file_claims import (
    ClaimConflictSerializer,
    ClaimedFilesSerializer,
    FileCheckInput,
    FileCheckSerializer,
    FileClaimInput,
    FileClaimSerializer,
    FileReleaseInput,
    HolderSerializer,
    PathField,
    ReleasedFilesSerializer,
    path_list,
)
from coordination.api.serializers.issues import (
    IssueInput,
    IssueSerializer,
    QueuedIssueSerializer,
    ReadyQuery,
    ReportSerializer,
    TransitionInput,
    WorkflowSerializer,
)
from coordination.api.serializers.leases import (
    LeaseReleaseInput,
    LeaseSerializer,
    WipCapDenialSerializer,
)
from coordination.api.serializers.messages import MessageInput, MessageSerializer
from coordination.api.serializers.projects import ProjectInput, ProjectSerializer
from coordination.api.serializers.runs import (
    RunDispatchInput,
    RunFinishInput,
    RunSerializer,
    WorktreeInput,
    WorktreeSerializer,
)
from coordination.api.serializers.sessions import (
    SessionRefInput,
    SessionRegisterInput,
    SessionSerializer,
)
from coordination.api.serializers.work import (
    FinishedSerializer,
    FinishWorkInput,
    StartedSerializer,
    StartWorkInput,
)

__all__ = [
    "BlankAsNullChoiceField",
    "ClaimConflictSerializer",
    "ClaimedFilesSerializer",
    "FenceField",
    "FieldsBoundOnce",
    "FileCheckInput",
    "FileCheckSerializer",
    "FileClaimInput",
    "FileClaimSerializer",
    "FileReleaseInput",
    "FinishWorkInput",
    "FinishedSerializer",
    "HolderSerializer",
    "IdField",
    "IssueInput",
    "IssueSerializer",
    "LeaseReleaseInput",
    "LeaseSerializer",
    "MessageInput",
    "MessageSerializer",
    "PathField",
    "ProjectInput",
    "ProjectSerializer",
    "QueuedIssueSerializer",
    "ReadyQuery",
    "ReleaseReasonField",
    "ReleasedFilesSerializer",
    "ReportSerializer",
    "RunDispatchInput",
    "RunFinishInput",
    "RunSerializer",
    "SessionRefInput",
    "SessionRegisterInput",
    "SessionSerializer",
    "SlugRefField",
    "StartWorkInput",
    "StartedSerializer",
    "StrictBooleanField",
    "StrictCharField",
    "StrictChoiceField",
    "TransitionInput",
    "WipCapDenialSerializer",
    "WorkflowSerializer",
    "WorktreeInput",
    "WorktreeSerializer",
    "path_list",
]
