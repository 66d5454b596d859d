"""The story behind the heatmap: the board, an issue, an agent and a path, as reads.

Each page is a fixed handful of statements whatever its rows: counts and holders are
correlated subqueries or ``GROUP BY`` in the database, lists are capped, and the rows a
template follows (issue, agent, session) are selected with them.
"""

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    F,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
    Window,
)
from django.db.models.functions import Cast, Coalesce, RowNumber

from coordination.liveness import live_q, stalled_q, young_q
from coordination.models import (
    Agent,
    AgentSession,
    ClaimConflict,
    Event,
    FileClaim,
    Issue,
    IssueLease,
    Message,
    Project,
    Run,
    Workspace,
)
from coordination.paths import under_prefix
from coordination.selectors.dashboard import count_of
from coordination.selectors.graph import Graph, graph_of, with_graph
from coordination.selectors.landing_stats import open_entry_of_issue
from heatmap.models import DayCount, DayCountSeries
from heatmap.rollups import outside_days, whole_days

OPEN_STATUSES = (
    Issue.Status.BACKLOG,
    Issue.Status.TODO,
    Issue.Status.IN_PROGRESS,
    Issue.Status.IN_REVIEW,
)
FOLDED_STATUSES = (Issue.Status.DONE, Issue.Status.CANCELLED)
CARDS_PER_COLUMN = 60  # a column shows its first cards and says how many more there are
LIST_LIMIT = 30  # rows per table on the agent and path pages
TIMELINE_LIMIT = 300  # newest events of an issue's timeline


# --- the board ----------------------------------------------------------------------


@dataclass
class Column:
    status: str
    label: str
    folded: bool
    total: int
    cards: list[Issue] = field(default_factory=list)

    @property
    def more(self) -> int:
        return self.total - len(self.cards)


def in_window(rows: QuerySet[Any], column: str, since: datetime, until: datetime) -> QuerySet[Any]:
    return rows.filter(**{f"{column}__gte": since, f"{column}__lt": until})


def board_issues(
    workspace: Workspace,
    *,
    project: Project | None = None,
    agent: Agent | None = None,
    text: str = "",
) -> QuerySet[Issue]:
    """The workspace's issues that pass the board's filters. ``agent``: issues it is
    assigned, or has ever leased. ``text``: in the title, or ``#<id>``/``<id>``."""
    rows = Issue.objects.filter(workspace=workspace)
    if project is not None:
        rows = rows.filter(project=project)
    if agent is not None:
        leased = IssueLease.objects.filter(issue=OuterRef("pk"), agent=agent)
        rows = rows.filter(Q(assignee=agent) | Exists(leased))
    text = text.strip()
    if text:
        match = Q(title__icontains=text)
        digits = text.removeprefix("#")
        if digits.isdigit() and len(digits) < 19:
            match |= Q(pk=int(digits))
        rows = rows.filter(match)
    return rows


def with_story(rows: QuerySet[Issue], *, since: datetime, until: datetime) -> QuerySet[Issue]:
    """Each issue with its holder now (``holder_name``, ``holder_live``, and
    ``holder_stalled``: live but making no progress, invariant 17 (stalled is derived); no lease:
    None), its open landing entry (``landing_state``, ``landing_place``), and its claims and
    conflicts (either side) in the window, as subqueries: the whole days from the board's day
    counts (invariant 15 (day counts)), the part days from the rows."""
    unreleased = IssueLease.objects.filter(issue=OuterRef("pk"), released_at__isnull=True)
    days = whole_days(since, until)

    def counted(rows: QuerySet[Any], column: str, series: DayCountSeries) -> Any:
        if days is None:
            return count_of(in_window(rows, column, since, until))
        return kept_count(series, days) + count_of(
            rows.filter(outside_days(column, since, until, days))
        )

    # Either side, each from its own index: as rejected, and as holder of another's.
    rejected = ClaimConflict.objects.filter(rejected_issue=OuterRef("pk"))
    held = ClaimConflict.objects.filter(holding_issue=OuterRef("pk")).exclude(
        rejected_issue=OuterRef("pk")
    )
    claims = FileClaim.objects.filter(issue=OuterRef("pk"))
    return rows.select_related("project", "assignee").annotate(
        holder_name=Subquery(unreleased.values("agent__name")[:1]),
        holder_held=Exists(unreleased),
        holder_live=Exists(unreleased.filter(live_q("session__") & young_q())),
        holder_stalled=Exists(unreleased.filter(stalled_q("session__"))),
        claims_in_window=counted(claims, "claimed_at", DayCountSeries.ISSUE_CLAIMS),
        conflicts_in_window=counted(rejected, "occurred_at", DayCountSeries.ISSUE_REJECTED)
        + counted(held, "occurred_at", DayCountSeries.ISSUE_HELD),
        # Its open landing entry: queued or testing, and its place in the project's queue
        # (invariant 21 (the default branch is always green)).
        **open_entry_of_issue(),
    )


def kept_count(series: DayCountSeries, days: tuple[date, date]) -> Any:
    """The outer issue's count of a board series over the whole ``days``: a range of
    the day counts' index by kind, a few rows a day."""
    first, end = days
    kept = (
        DayCount.objects.filter(
            workspace=OuterRef("workspace_id"),
            series=series,
            kind=Cast(OuterRef("pk"), CharField()),
            day__gte=first,
            day__lt=end,
        )
        .order_by()
        .values("kind")
        .annotate(total=Sum("n"))
        .values("total")
    )
    return Coalesce(Subquery(kept, output_field=IntegerField()), 0)


def priority_order() -> Case:
    """Urgent first, "no priority" (0) last."""
    return Case(When(priority=0, then=Value(9)), default=F("priority"), output_field=IntegerField())


def board(
    workspace: Workspace,
    *,
    since: datetime,
    until: datetime,
    project: Project | None = None,
    agent: Agent | None = None,
    text: str = "",
) -> list[Column]:
    """A column per status, workflow order, the closed ones folded: three statements
    (the totals; each column's first cards, ranked in the database; and those cards'
    holders and counts, so that the window is counted for the cards shown only)."""
    rows = board_issues(workspace, project=project, agent=agent, text=text)
    totals = dict(rows.values_list("status").annotate(n=Count("*")).order_by())
    # Open columns: urgent first, then the most recently touched; closed: most recent.
    first_key = Case(
        When(status__in=FOLDED_STATUSES, then=Value(0)),
        default=priority_order(),
        output_field=IntegerField(),
    )
    card_order = [first_key.asc(), F("updated_at").desc(), F("id").desc()]
    ranks = dict(
        rows.annotate(rank=Window(RowNumber(), partition_by=F("status"), order_by=card_order))
        .filter(rank__lte=CARDS_PER_COLUMN)
        .values_list("pk", "rank")
    )
    # Each card with its blockers and its expected files others hold (invariant 16 (the work
    # graph)), in the same statement.
    cards = with_graph(
        with_story(Issue.objects.filter(pk__in=ranks), since=since, until=until),
        collisions=True,
    )
    columns: dict[str, Column] = {
        status: Column(
            status=status,
            label=Issue.Status(status).label,
            folded=status in FOLDED_STATUSES,
            total=totals.get(status, 0),
        )
        for status in (*OPEN_STATUSES, *FOLDED_STATUSES)
    }
    for issue in sorted(cards, key=lambda card: ranks[card.pk]):
        graph_of(issue)  # read off the card's own columns, as ``issue.graph``
        columns[issue.status].cards.append(issue)
    return list(columns.values())


# --- an issue -----------------------------------------------------------------------


@dataclass(frozen=True)
class IssueStory:
    issue: Issue
    lease: IssueLease | None  # unreleased, with ``is_live``
    claims: list[FileClaim]  # unreleased, with ``is_live``
    events: list[Event]  # newest first
    conflicts: list[ClaimConflict]  # where others met this issue (see ``timeline``)
    messages: dict[int, Message]  # the posts the events name, by id
    runs: dict[int, Run]  # the runs the events name, by id
    graph: Graph  # blockers, what it blocks, parent, children (invariant 16 (the work graph))


def issue_story(workspace: Workspace, issue: Issue) -> IssueStory:
    """What ``issue`` holds now and what happened to it: a fixed handful of statements."""
    lease = (
        IssueLease.objects.unreleased()
        .filter(issue=issue)
        .with_live()
        .select_related("agent", "session")
        .first()
    )
    claims = list(
        FileClaim.objects.unreleased()
        .filter(issue=issue)
        .with_live()
        .select_related("agent")
        .order_by("path")
    )
    events = list(
        Event.objects.filter(workspace=workspace, issue=issue)
        .select_related("agent")
        .order_by("-id")[:TIMELINE_LIMIT]
    )
    # Conflicts whose own event is not this issue's: another issue refused on a path
    # this one held, and the paths this issue took by force (its grant names no loser).
    conflicts = list(
        ClaimConflict.objects.filter(workspace=workspace)
        .filter(Q(holding_issue=issue) | Q(rejected_issue=issue, forced=True))
        .select_related("rejected_issue", "rejected_agent", "holding_issue", "holding_agent")
        .order_by("-occurred_at", "-id")[:TIMELINE_LIMIT]
    )
    message_ids = [e.data.get("message") for e in events if e.type == "message.posted"]
    run_ids = [e.data.get("run") for e in events if e.type.startswith("run.")]
    messages = Message.objects.filter(workspace=workspace, pk__in=ids(message_ids))
    runs = Run.objects.filter(workspace=workspace, pk__in=ids(run_ids)).select_related("worktree")
    return IssueStory(
        issue=issue,
        lease=lease,
        claims=claims,
        events=events,
        conflicts=conflicts,
        messages={message.pk: message for message in messages.select_related("agent")},
        runs={run.pk: run for run in runs},
        graph=graph_of(issue),
    )


def ids(values: list[Any]) -> list[int]:
    return sorted({value for value in values if isinstance(value, int)})


# --- an agent -----------------------------------------------------------------------


@dataclass(frozen=True)
class AgentStory:
    agent: Agent
    live: bool
    session_count: int
    sessions: list[AgentSession]  # newest first, with ``is_live``
    leases: list[IssueLease]  # unreleased, with ``is_live``
    claims: list[FileClaim]  # unreleased, with ``is_live``
    caused: list[ClaimConflict]  # this agent was refused (or forced) in the window
    suffered: list[ClaimConflict]  # another agent wanted what this one held
    caused_total: int
    suffered_total: int
    issues: list[dict[str, Any]]  # the issues it leased: id, title, status, leases, last


def agent_story(
    workspace: Workspace, agent: Agent, *, since: datetime, until: datetime
) -> AgentStory:
    sessions = AgentSession.objects.filter(workspace=workspace, agent=agent)
    shown_sessions = list(sessions.with_live().order_by("-started_at", "-id")[:LIST_LIMIT])
    conflicts = in_window(
        ClaimConflict.objects.filter(workspace=workspace), "occurred_at", since, until
    ).select_related("rejected_issue", "rejected_agent", "holding_issue", "holding_agent")
    caused = conflicts.filter(rejected_agent=agent)
    suffered = conflicts.filter(holding_agent=agent)
    totals = sessions.aggregate(n=Count("*"), live=Count("pk", filter=live_q()))
    worked = (
        IssueLease.objects.filter(workspace=workspace, agent=agent)
        .values("issue_id", "issue__title", "issue__status")
        .annotate(leases=Count("*"), last=Max("acquired_at"))
        .order_by("-last", "-issue_id")[:LIST_LIMIT]
    )
    return AgentStory(
        agent=agent,
        live=bool(totals["live"]),
        session_count=totals["n"],
        sessions=shown_sessions,
        leases=list(
            IssueLease.objects.unreleased()
            .filter(workspace=workspace, agent=agent)
            .with_live()
            .select_related("issue")
            .order_by("-acquired_at")
        ),
        claims=list(
            FileClaim.objects.unreleased()
            .filter(workspace=workspace, agent=agent)
            .with_live()
            .select_related("issue")
            .order_by("path")[:100]
        ),
        caused=list(caused.order_by("-occurred_at", "-id")[:LIST_LIMIT]),
        suffered=list(suffered.order_by("-occurred_at", "-id")[:LIST_LIMIT]),
        caused_total=caused.count(),
        suffered_total=suffered.count(),
        issues=[dict(row) for row in worked],
    )


# --- a path -------------------------------------------------------------------------


@dataclass(frozen=True)
class PathStory:
    path: str
    claims: list[FileClaim]  # claimed in the window, newest first, with ``is_live``
    claim_total: int
    holders: list[FileClaim]  # unreleased now, with ``is_live``
    conflict_total: int
    forced_total: int


def path_story(workspace: Workspace, path: str, *, since: datetime, until: datetime) -> PathStory:
    """``path`` itself and, for a directory, everything under it (whole segments)."""
    claims = FileClaim.objects.filter(workspace=workspace).with_live()
    in_time = in_window(under_prefix(claims, "path", path), "claimed_at", since, until)
    conflicts = in_window(
        under_prefix(ClaimConflict.objects.filter(workspace=workspace), "path", path),
        "occurred_at",
        since,
        until,
    ).aggregate(n=Count("*"), forced=Count("pk", filter=Q(forced=True)))
    return PathStory(
        path=path,
        claims=list(
            in_time.select_related("issue", "agent").order_by("-claimed_at", "-id")[:LIST_LIMIT]
        ),
        claim_total=in_time.count(),
        holders=list(
            under_prefix(claims.unreleased(), "path", path)
            .select_related("issue", "agent")
            .order_by("path")[:50]
        ),
        conflict_total=conflicts["n"],
        forced_total=conflicts["forced"],
    )
