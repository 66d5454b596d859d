"""What agents hold and were refused: leases, file claims, and the contention logs
(WIP-cap denials, claim conflicts)."""

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet

from coordination.filtersets import (
    ClaimConflictFilter,
    FileClaimFilter,
    LeaseFilter,
    WipCapDenialFilter,
)
from coordination.models import ClaimConflict, FileClaim, IssueLease, WipCapDenial, Workspace
from coordination.selectors.filtering import filtered


def leases(workspace: Workspace) -> QuerySet[IssueLease]:
    return (
        IssueLease.objects.filter(workspace=workspace)
        .with_live()
        .select_related("agent")
        .order_by("-id")
    )


def lease_list(
    *, workspace: Workspace, filters: Mapping[str, Any] | None = None
) -> QuerySet[IssueLease]:
    return filtered(LeaseFilter, leases(workspace), filters)


def file_claims(workspace: Workspace) -> QuerySet[FileClaim]:
    return FileClaim.objects.filter(workspace=workspace).select_related("agent").order_by("-id")


def file_claim_list(
    *, workspace: Workspace, filters: Mapping[str, Any] | None = None
) -> QuerySet[FileClaim]:
    return filtered(FileClaimFilter, file_claims(workspace), filters)


def wip_cap_denials(workspace: Workspace) -> QuerySet[WipCapDenial]:
    return (
        WipCapDenial.objects.filter(workspace=workspace)
        .select_related("project", "agent")
        .order_by("-occurred_at", "-id")
    )


def wip_cap_denial_list(
    *, workspace: Workspace, filters: Mapping[str, Any] | None = None
) -> QuerySet[WipCapDenial]:
    return filtered(WipCapDenialFilter, wip_cap_denials(workspace), filters)


def claim_conflicts(workspace: Workspace) -> QuerySet[ClaimConflict]:
    return (
        ClaimConflict.objects.filter(workspace=workspace)
        .select_related("rejected_agent", "holding_agent")
        .order_by("-occurred_at", "-id")
    )


def claim_conflict_list(
    *, workspace: Workspace, filters: Mapping[str, Any] | None = None
) -> QuerySet[ClaimConflict]:
    return filtered(ClaimConflictFilter, claim_conflicts(workspace), filters)
