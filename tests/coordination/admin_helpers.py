"""Helpers of the admin tests: addresses, actions, the message bar, demo-sized data."""

import contextlib
from typing import Any

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
        resource = m.Resource.objects.create(workspace=workspace, name=f"db-{n}", capacity=2)
        m.ResourceHold.objects.create(
            workspace=workspace,
            resource=resource,
            session=session,
            agent=agent,
            issue=issue,
            units=1,
            slots=[0],
            **done,
        )
        ApiKey.issue(workspace, f"key-{n}")
        m.Landing.objects.create(
            workspace=workspace,
            project=project,
            issue=issue,
            session=session,
            agent=agent,
            branch=f"work-{n}",
            commit="0123abc",
            lease_fence=1,
            state="rejected",
            reason="conflict",
            detail=f"src/f{n}.py",
            finished_at=timezone.now(),
        )
        event = m.Event.objects.create(
            workspace=workspace,
            type="lease.granted",
            project=project,
            issue=issue,
            session=session,
            agent=agent,
            data={"lease": n + 1, "fence": 1},
        )
        webhook = m.Webhook.objects.create(
            workspace=workspace, url=f"https://hooks.example.test/{n}", secret="s" * 20
        )
        m.WebhookDelivery.objects.create(
            workspace=workspace, webhook=webhook, event=event, last_status=500, last_error="No."
        )


# --- a crowded fleet, for the browser's widths ------------------------------------------

DEEP = "services/coordination/file_claims/release/ordering/with/a/long/path"
LONG_TITLE = "Make the claim-conflict heatmap readable on a laptop without scrolling sideways"


def crowd(workspace, *, agents: int = 6) -> dict[str, Any]:
    """A fleet as the demo leaves one, with everything long that can be: deep paths,
    long titles, names and worktree paths; holders live, stale and ended; conflicts
    refused and forced; runs running, skipped and cancelled; WIP-cap denials, messages
    and a completion report. Built through the services, as agents would.

    Returns a stale session that still holds its work, and the reported issue."""
    from coordination.errors import CoordinationError
    from coordination.services import agents as sessions
    from coordination.services import file_claims, leases, messages, runs, workflow, worktrees
    from tests.conftest import expire

    m.Workspace.objects.create(slug="globex-industries", name="Globex Industries")  # a filter
    tree = worktrees.create_worktree(
        workspace=workspace,
        slug="integration-release-candidate",
        name="The integration checkout of the release candidate",
        path="/srv/projektor/worktrees/integration-release-candidate-with-a-long-directory",
        branch="release/2026-12-candidate-with-a-long-branch-name",
    )
    project = m.Project.objects.create(
        workspace=workspace,
        key="platform-services-and-tools",
        name="Platform services, their tooling and the long-running migrations",
        agent_wip_limit=2 * agents,
        primary_worktree=tree,
    )
    tiny = m.Project.objects.create(workspace=workspace, key="tiny", name="Tiny", agent_wip_limit=1)
    crew = [
        sessions.register_session(
            workspace=workspace,
            agent_name=f"release-manager-{n:04d}" if n % 2 else f"coder-{n}",
            role="backend-engineer",
            department="platform-infrastructure",
        )
        for n in range(agents)
    ]
    worked = []
    for n, session in enumerate(crew):
        for take in range(3):  # the third in the tiny project: a WIP-cap denial but once
            issue = Issue.objects.create(
                workspace=workspace,
                project=tiny if take == 2 else project,
                title=f"{LONG_TITLE}, take {n}.{take}",
                description="Done when it fits.",
                status=Issue.Status.TODO,
                requires_filesystem=take == 1,
            )
            try:
                leases.claim_issue(workspace=workspace, issue_id=issue.pk, session_id=session.pk)
            except CoordinationError:
                continue
            worked.append((session, issue))
            paths = [
                f"{DEEP}/agent_{n}/take_{take}/module_{n}{take}{k}_of_the_fleet.py"
                for k in range(4)
            ]
            file_claims.claim_files(
                workspace=workspace, issue_id=issue.pk, paths=paths, session_id=session.pk
            )
            with contextlib.suppress(CoordinationError):  # a busy worktree: a cancelled run
                runs.dispatch_run(workspace=workspace, session_id=session.pk, issue_id=issue.pk)
            messages.record_message(
                workspace=workspace,
                scope=messages.issue_scope(issue.pk),
                body=f"{session.agent.name} started on this. " + "A long note. " * 20,
                session=session,
            )
    # Contention: each agent wants its neighbour's first path; every other one forces it.
    for n, (session, issue) in enumerate(worked[1:], start=1):
        wanted = [file_claims_of(worked[n - 1][1])[0]]
        with contextlib.suppress(CoordinationError):
            file_claims.claim_files(
                workspace=workspace,
                issue_id=issue.pk,
                paths=wanted,
                session_id=session.pk,
                force=n % 3 == 0,
            )
    unbound = Issue.objects.create(  # no worktree anywhere: a skipped run
        workspace=workspace,
        project=m.Project.objects.create(workspace=workspace, key="docs", name="Docs"),
        title=LONG_TITLE,
        description="Done when it fits.",
        status=Issue.Status.TODO,
        requires_filesystem=True,
    )
    with contextlib.suppress(CoordinationError):
        runs.dispatch_run(workspace=workspace, session_id=crew[0].pk, issue_id=unbound.pk)
    reported = worked[0][1]
    workflow.transition_issue(
        workspace=workspace, issue_id=reported.pk, to="in_progress", by_human=False
    )
    workflow.transition_issue(
        workspace=workspace,
        issue_id=reported.pk,
        to="in_review",
        by_human=False,
        report={
            "summary": "Columns merged into one holder cell. " * 5,
            "verification": "The browser test measures every list at 1280 px.",
            "pr_link": "https://git.example.com/projektor/pull/42",
        },
    )
    crowd_resources(workspace, crew, worked)
    crowd_landings(workspace, worked[1:5], tester=crew[0])
    for session in crew[1::3]:
        expire(session)  # stale: crashed, still holding
    for session in crew[2::3]:
        sessions.end_session(workspace=workspace, session_id=session.pk)
    for n in range(3):
        ApiKey.issue(workspace, f"fleet key for the nightly release pipeline {n}")
    crowd_webhooks(workspace)
    return {"stale": crew[1], "reported": reported}


def crowd_resources(workspace, crew, worked) -> None:
    """A long-named pool held in full (wide slot lists), a test database one agent
    holds, and a hold released: every holder state the lists show."""
    from coordination.services import resources

    pool = resources.create_resource(
        workspace=workspace,
        name="ports:integration-release-candidate-services",
        capacity=12,
        description="Ports 8100-8111 of the integration host, one per service under test. " * 3,
    )
    resources.create_resource(workspace=workspace, name="db:test", capacity=1)
    issues = dict(worked)
    for session, units in zip(crew[:3], (8, 3, 1), strict=True):
        resources.acquire(
            workspace=workspace,
            name=pool.name,
            session_id=session.pk,
            units=units,
            issue_id=issues[session].pk if session in issues else None,
        )
    resources.acquire(workspace=workspace, name="db:test", session_id=crew[3].pk)
    resources.release(workspace=workspace, name="db:test", session_id=crew[3].pk)
    resources.acquire(workspace=workspace, name="db:test", session_id=crew[4].pk)


def crowd_landings(workspace, worked, *, tester) -> None:
    """The issues' branches queued to land (long branch names): the first landed, the
    second rejected with a long check output, the rest under test or queued."""
    from coordination.services import landings

    for session, issue in worked:
        lease = IssueLease.objects.live().get(issue=issue)
        landings.queue_landing(
            workspace=workspace,
            issue_id=issue.pk,
            session_id=session.pk,
            branch=f"projektor/{issue.pk}-{session.agent.name}-{LONG_TITLE.lower()[:40]}",
            commit="0123456789abcdef0123456789abcdef01234567",
            fence=lease.fence,
        )
    keys = {issue.project.key for _, issue in worked}
    for key in sorted(keys):
        batch = landings.take_batch(
            workspace=workspace, project_key=key, session_id=tester.pk, max_entries=2
        )
        if len(batch.entries) < 2:
            continue
        common = {"workspace": workspace, "session_id": tester.pk, "fence": batch.fence}
        landings.land(landing_id=batch.entries[0].pk, commit="f" * 40, **common)
        landings.reject(
            landing_id=batch.entries[1].pk,
            reason="check_failed",
            detail="check_login: FAILED NameError " * 40,
            **common,
        )


def file_claims_of(issue) -> list[str]:
    return sorted(FileClaim.objects.filter(issue=issue).values_list("path", flat=True))


def crowd_webhooks(workspace) -> None:
    """Webhooks with long URLs and reasons, and deliveries in every state."""
    events = list(m.Event.objects.filter(workspace=workspace).order_by("id")[:6])
    long_url = "https://ci.example.com/hooks/projektor/platform-services/release-pipeline"
    for n, active in enumerate([True, False]):
        webhook = m.Webhook.objects.create(
            workspace=workspace,
            url=f"{long_url}/{n}?token=a-long-query-string-of-the-receiver",
            types=list(m.EventType.values[:5]),
            secret="s" * 32,
            active=active,
            deactivated_reason=""
            if active
            else "Delivery 41 (event 812) failed for 24 h, 158 attempts; the last: HTTP 503: "
            + "Service Unavailable " * 4,
        )
        for k, event in enumerate(events):
            state = ["pending", "delivered", "failed"][k % 3]
            m.WebhookDelivery.objects.create(
                workspace=workspace,
                webhook=webhook,
                event=event,
                state=state,
                attempts=k,
                last_status=503 if state != "delivered" else 200,
                last_error="ConnectError: [Errno 111] Connection refused " * 3
                if state != "delivered"
                else "",
                next_attempt_at=timezone.now() if state == "pending" else None,
            )
