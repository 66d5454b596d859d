"""Messages [list_messages]."""

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet

from coordination.filtersets import MessageFilter
from coordination.models import Message, Workspace
from coordination.selectors.filtering import filtered


def messages(workspace: Workspace) -> QuerySet[Message]:
    return (
        Message.objects.filter(workspace=workspace)
        .select_related("agent")
        .order_by("-created_at", "-id")
    )


def message_list(
    *, workspace: Workspace, filters: Mapping[str, Any] | None = None
) -> QuerySet[Message]:
    return filtered(MessageFilter, messages(workspace), filters)
