"""Who may see which workspace, and the workspace's API keys."""

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import AbstractUser, AnonymousUser
from django.db.models import QuerySet

from coordination.filtersets import KeyFilter
from coordination.models import ApiKey, Workspace
from coordination.selectors.filtering import filtered


def workspaces_visible_to(user: AbstractUser | AnonymousUser) -> QuerySet[Workspace]:
    """Members see their workspaces; superusers see every one; nobody else sees any.
    The one access rule of the managers' pages, the admin dashboard and the API's
    logged-in members."""
    workspaces = Workspace.objects.order_by("name", "slug")
    if not user.is_authenticated:
        return workspaces.none()
    if user.is_superuser:
        return workspaces
    return workspaces.filter(members=user.pk)


def api_keys(workspace: Workspace) -> QuerySet[ApiKey]:
    """The workspace's keys, newest first, with what the list shows of each."""
    return (
        ApiKey.objects.filter(workspace=workspace)
        .select_related("workspace", "agent")
        .order_by("-id")
    )


def api_key_list(
    *, workspace: Workspace, filters: Mapping[str, Any] | None = None
) -> QuerySet[ApiKey]:
    return filtered(KeyFilter, api_keys(workspace), filters)
