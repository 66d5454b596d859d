"""Read-only queries, scoped by workspace. Lookups raise the right domain error:
a URL id (or the ``issue`` of a body) that is not in the workspace is 404; any
other unknown reference in a body is 400 (DESIGN.md, error shape)."""

from django.db import connection
from django.db.models import (
    Case,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
    prefetch_related_objects,
)
from django.db.models.functions import Trim

from coordination.errors import InvalidInput, NotFound
from coordination.liveness import live_session_sql
from coordination.models import (
    Agent,
    AgentSession,
    AgentSessionQuerySet,
    ClaimConflict,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    Project,
    Run,
    WipCapDenial,
    Workspace,
    Worktree,
    WorktreeLock,
)


def sessions(workspace: Workspace) -> AgentSessionQuerySet:
    return (
        AgentSession.objects.filter(workspace=workspace)
        .with_live()
        .select_related("agent", "agent__worktree")
        .order_by("-id")
    )


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
) -> QuerySet[Issue]:
    """The ready queue [get_ready_issues]: issues in ``todo`` that meet the definition
    of ready and have no live lease, urgent first (priority 1, 2, 3, 4, then 0 for
    none), oldest first within a priority. With ``include_not_ready``, the other open
    issues without a live lease follow, in the same order (``is_ready`` tells them
    apart; ``workflow.missing_for_work`` says what each lacks)."""
    live_lease = Exists(IssueLease.objects.live().filter(issue=OuterRef("pk")))
    ready = Q(status=Issue.Status.TODO) & ~Q(title_trim="") & ~Q(description_trim="")
    rows = (
        issues(workspace)
        .exclude(status__in=Issue.CLOSED_STATUSES)
        .filter(~live_lease)
        .alias(title_trim=Trim("title"), description_trim=Trim("description"))
        .annotate(
            is_ready=Case(When(ready, then=True), default=False),
            rank=Case(
                When(priority=Issue.Priority.NONE, then=Value(5)),
                default=F("priority"),
                output_field=IntegerField(),
            ),
        )
    )
    if project is not None:
        rows = rows.filter(project=project)
    if not include_not_ready:
        rows = rows.filter(is_ready=True)
    return rows.order_by("-is_ready", "rank", "created_at", "id")


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
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {AgentSession._meta.db_table} s "
            f"WHERE s.id = %s AND {live_session_sql('s')}",
            [session.pk],
        )
        return cursor.fetchone() is not None


def get_worktree(workspace: Workspace, slug: str) -> Worktree:
    worktree = Worktree.objects.filter(workspace=workspace, slug=slug).first()
    if worktree is None:
        raise InvalidInput(f"Worktree {slug!r} does not exist.")
    return worktree


def get_agent(workspace: Workspace, name: str) -> Agent:
    agent = Agent.objects.filter(workspace=workspace, name=name).first()
    if agent is None:
        raise InvalidInput(f"Agent {name!r} does not exist.")
    return agent


def get_project(workspace: Workspace, key: str) -> Project:
    project = Project.objects.filter(workspace=workspace, key=key).first()
    if project is None:
        raise InvalidInput(f"Project {key!r} does not exist.")
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
