"""What the demo hands its user on every run: two logins, one live key and an issue
an agent can take right now, out of the live fleet's reach; and what the live demo
fleet needs: a key of its own and a reviewer's login."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model

from coordination.models import ApiKey, Issue, IssueLease, Project, Workspace
from coordination.models.tenancy import hash_api_key
from coordination.selectors.issues import ready_issues
from coordination.services import operators, projects

PASSWORD = "projektor-demo"
KEY_NAME = "demo"
FLEET_KEY_NAME = "demo-fleet"
REVIEWER = "demo-reviewer"
TOUR_PROJECT = "tour"
TOUR_ISSUE = {
    "title": "Add rate limits to the API",
    "description": "Limit each API key to a number of requests a minute; answer 429 past it.",
    "paths": ["src/api/rate_limits.py"],
}


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


def revoke_minted(workspace: Workspace, raw: str) -> None:
    """Revoke the key ``raw`` alone: a fleet that stops while the next one starts
    (``make run`` run again at once) leaves the next one's key of the same name working."""
    minted = ApiKey.objects.filter(workspace=workspace, key_hash=hash_api_key(raw))
    operators.revoke_api_keys(keys=minted.filter(revoked_at__isnull=True))


def reviewer_login(workspace: Workspace) -> tuple[str, str]:
    """The fleet's reviewer: a member, not staff, with a fresh random password on each
    start (nobody else logs in with it, so it is never printed)."""
    user, _ = get_user_model().objects.get_or_create(username=REVIEWER)
    password = secrets.token_urlsafe(24)
    user.set_password(password)
    user.save()
    workspace.members.add(user)
    return user.get_username(), password


def tour_issue(workspace: Workspace) -> Issue:
    """The banner's free issue, for the README's agent tour: ready, never leased, in a
    project of its own that the live fleet never works (its runners take their agents'
    home projects' queues, its reviewer reviews and grooms only those), so it waits for
    the person who pastes the tour, however long the fleet has run. A free one is
    handed out again; once one is taken, the next run files another."""
    project = Project.objects.filter(workspace=workspace, key=TOUR_PROJECT).first()
    if project is None:
        project = projects.create_project(
            workspace=workspace, key=TOUR_PROJECT, name="The agent tour (no fleet works it)"
        )
    queue = ready_issues(workspace, project=project, avoid_collisions=False)
    leased = set(IssueLease.objects.filter(issue__project=project).values_list("issue", flat=True))
    for issue in queue[: queue.count()]:
        if issue.pk not in leased:
            return issue
    return projects.create_issue(
        workspace=workspace,
        fields={"project": TOUR_PROJECT, "status": Issue.Status.TODO, **TOUR_ISSUE},
    )
