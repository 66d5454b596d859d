"""Helpers of the admin tests: addresses, actions, the message bar, demo-sized data."""

from django.urls import reverse
from django.utils import timezone

from coordination import models as m
from coordination.models import (
    AgentSession,
    ApiKey,
    ClaimConflict,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    Run,
    WipCapDenial,
    Worktree,
    WorktreeLock,
)


def url(model, view="changelist", *args):
    return reverse(f"admin:coordination_{model._meta.model_name}_{view}", args=args)


def act(client, model, action, rows):
    return client.post(
        url(model), {"action": action, "_selected_action": [row.pk for row in rows]}, follow=True
    )


def bar(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def populate(workspace, count: int, *, start: int = 0) -> None:
    """``count`` rows of every model the admin lists, as the services leave them."""
    for n in range(start, start + count):
        m.Workspace.objects.create(slug=f"ws-{n}", name=f"Workspace {n}")
        worktree = Worktree.objects.create(workspace=workspace, slug=f"wt-{n}", name="Tree")
        project = m.Project.objects.create(
            workspace=workspace, key=f"p{n}", name="P", primary_worktree=worktree
        )
        agent = m.Agent.objects.create(workspace=workspace, name=f"agent-{n}", worktree=worktree)
        session = AgentSession.objects.create(workspace=workspace, agent=agent)
        issue = Issue.objects.create(
            workspace=workspace,
            project=project,
            title=f"Issue {n}",
            assignee=agent,
            worktree=worktree,
        )
        done = {"released_at": timezone.now(), "release_reason": "released"}
        IssueLease.objects.create(
            workspace=workspace, issue=issue, session=session, agent=agent, **done
        )
        FileClaim.objects.create(
            workspace=workspace,
            issue=issue,
            session=session,
            agent=agent,
            path=f"src/f{n}.py",
            **done,
        )
        run = Run.objects.create(
            workspace=workspace,
            issue=issue,
            session=session,
            agent=agent,
            worktree=worktree,
            lock_mode="exclusive",
            status="succeeded",
        )
        WorktreeLock.objects.create(
            workspace=workspace, worktree=worktree, session=session, run=run, **done
        )
        ClaimConflict.objects.create(
            workspace=workspace,
            path=f"src/f{n}.py",
            rejected_issue=issue,
            holding_issue=issue,
            rejected_session=session,
            holding_session=session,
            rejected_agent=agent,
            holding_agent=agent,
        )
        WipCapDenial.objects.create(
            workspace=workspace, project=project, issue=issue, session=session, agent=agent, limit=3
        )
        Message.objects.create(
            workspace=workspace,
            scope=f"issue:{issue.pk}",
            body="hello",
            session=session,
            agent=agent,
        )
        ApiKey.issue(workspace, f"key-{n}")
