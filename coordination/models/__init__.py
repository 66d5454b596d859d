"""Coordination tables. Every row carries its workspace; liveness is derived.

Timestamps that take part in liveness or ordering are written by the database
(``db_default=DbNow()``), so one clock judges every heartbeat (invariant 1 (liveness)).
"""

from coordination.models.events import Event, EventType
from coordination.models.holdings import (
    ClaimConflict,
    FileClaim,
    HolderQuerySet,
    Holding,
    IssueLease,
    ReleaseReason,
    WipCapDenial,
)
from coordination.models.landings import Landing
from coordination.models.links import ORDERED_TYPES, ExpectedPath, IssueLink, LinkType
from coordination.models.resources import Resource, ResourceHold, ResourceWait
from coordination.models.runs import (
    Run,
    RunQuerySet,
    WorktreeLock,
)
from coordination.models.tenancy import (
    MAX_ID,
    ApiKey,
    KeyRingVersion,
    Workspace,
    hash_api_key,
)
from coordination.models.tracker import (
    READY,
    READY_RANK,
    Agent,
    AgentSession,
    AgentSessionQuerySet,
    Issue,
    Message,
    Project,
    Worktree,
)
from coordination.models.webhooks import Webhook, WebhookDelivery

__all__ = [
    "READY",
    "READY_RANK",
    "Agent",
    "AgentSession",
    "AgentSessionQuerySet",
    "ApiKey",
    "ClaimConflict",
    "Event",
    "EventType",
    "ExpectedPath",
    "FileClaim",
    "HolderQuerySet",
    "Holding",
    "Issue",
    "IssueLease",
    "IssueLink",
    "KeyRingVersion",
    "Landing",
    "LinkType",
    "MAX_ID",
    "ORDERED_TYPES",
    "Message",
    "Project",
    "ReleaseReason",
    "Resource",
    "ResourceHold",
    "ResourceWait",
    "Run",
    "RunQuerySet",
    "Webhook",
    "WebhookDelivery",
    "WipCapDenial",
    "Workspace",
    "Worktree",
    "WorktreeLock",
    "hash_api_key",
]
