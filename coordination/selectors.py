"""Read-only queries, scoped by workspace. Lookups raise the right domain error:
a URL id (or the ``issue`` of a body) that is not in the workspace is 404; any
other unknown reference in a body is 400 (docs/design.md, error shape)."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractUser, AnonymousUser
from django.db.models import (
    Count,
    F,
    Func,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Window,
    prefetch_related_objects,
)
from django.db.models.functions import RowNumber

from coordination.errors import InvalidInput, NotFound
from coordination.liveness import dialect, live_q
from coordination.models import (
    Agent,
    AgentSession,
    AgentSessionQuerySet,
    ApiKey,
    ClaimConflict,
    Event,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    Project,
    Run,
    Webhook,
    WebhookDelivery,
    WipCapDenial,
    Workspace,
    Worktree,
    WorktreeLock,
)
from coordination.services import sql
from coordination.services.rows import Listing, fetchone, take


def sessions(workspace: Workspace) -> AgentSessionQuerySet:
    return (
        AgentSession.objects.filter(workspace=workspace)
        .with_live()
        .select_related("agent", "agent__worktree")
        .order_by("-id")
    )


def session_list(
    workspace: Workspace,
    *,
    live: bool | None = None,
    agent: str | None = None,
    role: str | None = None,
) -> Listing[AgentSession]:
    """GET /sessions/ [list_active_agents]: ``sessions()`` filtered, newest first, as
    SQL (``sql.session_page``): any agent of a fleet may ask who else is live. The
    count and a page of the 1,000 live among 100,000 sessions, loaded: 14.7 ms as
    querysets, 10.5 ms so on PostgreSQL; 15.3 and 6.6 ms on SQLite."""
    d = dialect()
    listed = sql.SessionList(workspace_id=workspace.pk, live=live, agent=agent, role=role)
    return Listing(
        counted=sql.session_count(d, listed),
        page=lambda limit, offset: sql.session_page(d, listed, limit=limit, offset=offset),
        load=shown_session,
    )


def shown_session(row: Sequence[Any]) -> AgentSession:
    """A row of ``sql.shown_session_columns`` as the instances ``sessions()`` gives:
    the session with ``is_live``, its agent and the agent's worktree."""
    session, at = take(AgentSession, row, 0)
    assert session is not None
    session.is_live = bool(row[at])  # type: ignore[attr-defined]
    agent, at = take(Agent, row, at + 1)
    assert agent is not None
    agent.worktree, _ = take(Worktree, row, at)
    session.agent = agent
    return session


def live_sessions(workspace: Workspace) -> AgentSessionQuerySet:
    return sessions(workspace).live()


def leases(workspace: Workspace) -> QuerySet[IssueLease]:
    return (
        IssueLease.objects.filter(workspace=workspace)
        .with_live()
        .select_related("agent")
        .order_by("-id")
    )


def unreleased_leases() -> Prefetch:
    """An issue's unreleased lease (one at most), as ``unreleased_leases``."""
    unreleased = IssueLease.objects.unreleased().with_live().select_related("agent")
    return Prefetch("leases", queryset=unreleased, to_attr="unreleased_leases")


def issues(workspace: Workspace) -> QuerySet[Issue]:
    return (
        Issue.objects.filter(workspace=workspace)
        .select_related("project", "worktree", "assignee")
        .prefetch_related(unreleased_leases())
        .order_by("-id")
    )


def issue_as_shown(issue: Issue) -> Issue:
    """``issue`` as a service returned it, with what ``issues()`` loads: only what it
    lacks is fetched (a relation already loaded, or empty, costs no query)."""
    prefetch_related_objects([issue], "project", "worktree", "assignee", unreleased_leases())
    return issue


def ready_issues(
    workspace: Workspace, *, project: Project | None = None, include_not_ready: bool = False
) -> Listing[Issue]:
    """The ready queue [get_ready_issues]: issues in ``todo`` that meet the definition
    of ready and have no live lease, urgent first (priority 1, 2, 3, 4, then 0 for
    none), oldest first within a priority. With ``include_not_ready``, the other open
    issues without a live lease follow, in the same order (``workflow.missing_for_work``
    says what each lacks). Each issue as ``issues()`` loads it.

    SQL (``sql.queue_page``), paged as a queryset is: the queue alone is read off its
    partial index (``issue_ready_queue_idx``) in order, up to the page's end, and on
    PostgreSQL its count reads the index only."""
    d = dialect()
    queue = sql.Queue(
        workspace_id=workspace.pk,
        project_id=project.pk if project is not None else None,
        closed=sorted(Issue.CLOSED_STATUSES) if include_not_ready else None,
    )
    return Listing(
        counted=sql.queue_count(d, queue),
        page=lambda limit, offset: sql.queue_page(d, queue, limit=limit, offset=offset),
        load=queued_issue,
    )


def queued_issue(row: Sequence[Any]) -> Issue:
    """A row of ``sql.queue_page``: the issue with its project, worktree and assignee
    and, as ``unreleased_leases``, its unreleased lease with ``is_live`` and its agent."""
    issue, at = take(Issue, row, 0)
    assert issue is not None
    project, at = take(Project, row, at)
    assert project is not None  # an issue's project is required
    issue.project = project
    issue.worktree, at = take(Worktree, row, at)
    issue.assignee, at = take(Agent, row, at)
    lease, at = take(IssueLease, row, at)
    if lease is not None:
        lease.is_live = bool(row[at])  # type: ignore[attr-defined]
        lease.agent, _ = take(Agent, row, at + 1)
    issue.unreleased_leases = [lease] if lease is not None else []  # type: ignore[attr-defined]
    return issue


def wip_cap_denials(workspace: Workspace) -> QuerySet[WipCapDenial]:
    return (
        WipCapDenial.objects.filter(workspace=workspace)
        .select_related("project", "agent")
        .order_by("-occurred_at", "-id")
    )


def projects(workspace: Workspace) -> QuerySet[Project]:
    return (
        Project.objects.filter(workspace=workspace)
        .select_related("primary_worktree")
        .order_by("key")
    )


def get_issue(workspace: Workspace, issue_id: int, *, for_update: bool = False) -> Issue:
    rows = Issue.objects.filter(workspace=workspace, pk=issue_id)
    if for_update:  # read-modify-write inside a transaction; NO KEY lets rows that
        # point at the issue (claims, leases) pass their foreign-key checks.
        rows = rows.select_for_update(of=("self",), no_key=True)
    issue = rows.select_related("project").first()
    if issue is None:
        raise NotFound(f"Issue {issue_id} does not exist.")
    return issue


def get_session(workspace: Workspace, session_id: int, *, in_url: bool = False) -> AgentSession:
    session = (
        AgentSession.objects.filter(workspace=workspace, pk=session_id)
        .select_related("agent")
        .first()
    )
    if session is None:
        error = NotFound if in_url else InvalidInput
        raise error(f"Session {session_id} does not exist.")
    return session


def is_live(session: AgentSession) -> bool:
    """Judged by the database, with the same predicate as every other check (as
    SQL: it is asked on every claim, and a queryset costs more than its round trip)."""
    return fetchone(sql.session_is_live(dialect(), session_id=session.pk)) is not None


def get_worktree(workspace: Workspace, slug: str) -> Worktree:
    worktree = Worktree.objects.filter(workspace=workspace, slug=slug).first()
    if worktree is None:
        raise InvalidInput(f"Worktree {slug!r} does not exist.")
    return worktree


def named(field: str | None) -> dict[str, str]:
    """The ``field`` of an error, when the caller knows which input named it."""
    return {"field": field} if field else {}


def get_agent(workspace: Workspace, name: str, *, field: str | None = None) -> Agent:
    agent = Agent.objects.filter(workspace=workspace, name=name).first()
    if agent is None:
        raise InvalidInput(f"Agent {name!r} does not exist.", **named(field))
    return agent


def get_project(workspace: Workspace, key: str, *, field: str | None = None) -> Project:
    project = Project.objects.filter(workspace=workspace, key=key).first()
    if project is None:
        raise InvalidInput(f"Project {key!r} does not exist.", **named(field))
    return project


def worktrees(workspace: Workspace) -> QuerySet[Worktree]:
    return Worktree.objects.filter(workspace=workspace).order_by("slug")


def runs(workspace: Workspace) -> QuerySet[Run]:
    """Each run with ``lock_fence``: the fence of its worktree lock (a run takes at
    most one), or None; one subquery, so a list costs no query per run."""
    lock = WorktreeLock.objects.filter(run=OuterRef("pk")).order_by("-id").values("fence")[:1]
    return (
        Run.objects.filter(workspace=workspace)
        .with_live()
        .annotate(lock_fence=Subquery(lock))
        .select_related("worktree")
        .order_by("-id")
    )


def get_run(workspace: Workspace, run_id: int) -> Run:
    run = runs(workspace).filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"Run {run_id} does not exist.")
    return run


# --- file claims, the contention log, messages -----------------------------------


def file_claims(workspace: Workspace) -> QuerySet[FileClaim]:
    return FileClaim.objects.filter(workspace=workspace).select_related("agent").order_by("-id")


def claim_conflicts(workspace: Workspace) -> QuerySet[ClaimConflict]:
    return (
        ClaimConflict.objects.filter(workspace=workspace)
        .select_related("rejected_agent", "holding_agent")
        .order_by("-occurred_at", "-id")
    )


def messages(workspace: Workspace) -> QuerySet[Message]:
    return (
        Message.objects.filter(workspace=workspace)
        .select_related("agent")
        .order_by("-created_at", "-id")
    )


def api_keys(workspace: Workspace) -> QuerySet[ApiKey]:
    """The workspace's keys, newest first, with what the list shows of each."""
    return (
        ApiKey.objects.filter(workspace=workspace)
        .select_related("workspace", "agent")
        .order_by("-id")
    )


def webhooks(workspace: Workspace) -> QuerySet[Webhook]:
    return Webhook.objects.filter(workspace=workspace).order_by("id")


def webhook_deliveries(webhook: Webhook, *, state: str | None = None) -> QuerySet[WebhookDelivery]:
    """Newest first, each with its event's type (a subquery, not a join: a pruned
    event leaves its delivery listed, with no type)."""
    rows = WebhookDelivery.objects.filter(webhook=webhook)
    if state is not None:
        rows = rows.filter(state=state)
    event_type = Event.objects.filter(pk=OuterRef("event_id")).values("type")[:1]
    return rows.annotate(event_type=Subquery(event_type)).order_by("-id")


# --- workspaces: who may see which, and each at a glance ---------------------------


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


RECENT = timedelta(hours=24)  # "the last 24 h" of the workspace list and the dashboard


def count_of(rows: QuerySet[Any]) -> Subquery:
    """``(SELECT COUNT(*) …)``: a plain function, not an aggregate, so no GROUP BY; and
    ``*``, not the id, so an index on the filter's columns can answer it alone."""
    counted = (
        rows.order_by()
        .annotate(n=Func(template="COUNT(*)", output_field=IntegerField()))
        .values("n")
    )
    return Subquery(counted, output_field=IntegerField())


def workspace_overview(workspaces: QuerySet[Workspace], *, since: datetime) -> QuerySet[Workspace]:
    """Each workspace with ``live_agents`` now, and since ``since`` its claim conflicts
    (``rejected``, ``forced``, ``recent_conflicts`` for both) and WIP-cap ``denials``:
    correlated subqueries, so the list is one query however many workspaces it shows."""
    conflicts = ClaimConflict.objects.filter(workspace=OuterRef("pk"), occurred_at__gte=since)
    return workspaces.annotate(
        live_agents=count_of(AgentSession.objects.live().filter(workspace=OuterRef("pk"))),
        rejected=count_of(conflicts.filter(forced=False)),
        forced=count_of(conflicts.filter(forced=True)),
        recent_conflicts=count_of(conflicts),
        denials=count_of(
            WipCapDenial.objects.filter(workspace=OuterRef("pk"), occurred_at__gte=since)
        ),
    )


@dataclass(frozen=True)
class ProjectLoad:
    pk: int
    workspace_id: int
    key: str
    name: str
    limit: int
    live: int  # unreleased leases whose holder is live: what the WIP cap counts
    stale: int  # unreleased, holder dead: reclaimable by the next claimer


def project_loads(workspaces: Iterable[Workspace]) -> list[ProjectLoad]:
    """Every project of ``workspaces`` against its WIP cap, by key, in one query."""
    unreleased = Q(issues__leases__released_at__isnull=True)
    rows = (
        Project.objects.filter(workspace__in=list(workspaces))
        .annotate(
            live=Count("issues__leases", filter=unreleased & live_q("issues__leases__session__")),
            unreleased=Count("issues__leases", filter=unreleased),
        )
        .order_by("key", "workspace_id")
    )
    return [
        ProjectLoad(
            pk=row.pk,
            workspace_id=row.workspace_id,
            key=row.key,
            name=row.name,
            limit=row.agent_wip_limit,
            live=row.live,  # type: ignore[attr-defined]
            stale=row.unreleased - row.live,  # type: ignore[attr-defined]
        )
        for row in rows
    ]


# Runs that did not start: skipped (worktree unresolved) or cancelled (busy).
TROUBLED_RUN_STATUSES = (Run.Status.SKIPPED, Run.Status.CANCELLED)


def troubled_runs(
    workspaces: Iterable[Workspace], *, since: datetime, until: datetime, per_workspace: int
) -> list[Run]:
    """The newest ``per_workspace`` runs of each workspace that did not start in the
    window, newest first: one query (a row number per workspace) however many."""
    newest_first = (F("started_at").desc(), F("id").desc())
    return list(
        Run.objects.filter(
            workspace__in=list(workspaces),
            status__in=TROUBLED_RUN_STATUSES,
            started_at__gte=since,
            started_at__lt=until,
        )
        .select_related("issue", "agent", "worktree")
        .annotate(rank=Window(RowNumber(), partition_by=F("workspace_id"), order_by=newest_first))
        .filter(rank__lte=per_workspace)
        .order_by("workspace_id", *newest_first)
    )
