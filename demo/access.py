"""What the demo hands its user on every run: two logins, one live key and an issue
an agent can take right now; and what the live demo fleet needs: a key of its own and
a reviewer's login."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model

from coordination.models import ApiKey, Issue, IssueLease, Workspace
from coordination.selectors.issues import ready_issues
from coordination.services import operators

PASSWORD = "projektor-demo"
KEY_NAME = "demo"
FLEET_KEY_NAME = "demo-fleet"
REVIEWER = "demo-reviewer"


@dataclass(frozen=True)
class Login:
    username: str
    operator: bool
    password: str | None  # None: changed since the seed, so not ours to print


def login(workspace: Workspace, username: str, password: str, *, operator: bool) -> Login:
    """Create the user if missing (a member of the demo workspace). An existing
    user's password is left alone: it is printed only while it is still
    ``password``, since a changed one cannot be read back."""
    user, created = get_user_model().objects.get_or_create(
        username=username, defaults={"is_staff": operator, "is_superuser": operator}
    )
    if created:
        user.set_password(password)
        user.save()
    workspace.members.add(user)
    still = created or user.check_password(password)
    return Login(username=username, operator=operator, password=password if still else None)


def fresh_key(workspace: Workspace, name: str = KEY_NAME) -> str:
    """Revoke the keys of that name of earlier runs and mint one: only its hash is
    stored, so an old key cannot be printed again, and old ones are not left working."""
    revoke(workspace, name)
    return ApiKey.issue(workspace, name)[1]


def revoke(workspace: Workspace, name: str) -> None:
    earlier = ApiKey.objects.filter(workspace=workspace, name=name, revoked_at__isnull=True)
    operators.revoke_api_keys(keys=earlier)


def reviewer_login(workspace: Workspace) -> tuple[str, str]:
    """The fleet's reviewer: a member, not staff, with a fresh random password on each
    start (nobody else logs in with it, so it is never printed)."""
    user, _ = get_user_model().objects.get_or_create(username=REVIEWER)
    password = secrets.token_urlsafe(24)
    user.set_password(password)
    user.save()
    workspace.members.add(user)
    return user.get_username(), password


def free_issue(workspace: Workspace) -> Issue | None:
    """The first issue of the ready queue that a new session can claim now (its
    project is below its WIP cap), preferring one never leased: its first lease has
    fence 1."""
    queue = ready_issues(workspace)
    ready = queue[: queue.count()]
    ever_leased = set(IssueLease.objects.filter(issue__in=ready).values_list("issue", flat=True))
    for issue in sorted(ready, key=lambda issue: issue.pk in ever_leased):
        live = IssueLease.objects.live().filter(issue__project=issue.project).count()
        if live < issue.project.agent_wip_limit:
            return issue
    return None
