"""What the issue's admin page shows around its fields: the file claims it holds, the
conflicts it took part in, the messages posted to it. Each panel is one bounded
query, so the page costs the same however long the issue's history is."""

from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from coordination import models as m
from coordination.admin import display
from coordination.services.messages import issue_scope

SHOWN = 10  # rows per panel; its "all" link lists the rest


@dataclass(frozen=True)
class Panel:
    title: str
    headers: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    more: list[tuple[str, str]]  # (label, address): admin lists of every row, this issue's
    empty: str


def changelist(model: type[Any], query: str) -> str:
    return f"{reverse(f'admin:coordination_{model._meta.model_name}_changelist')}?{query}"


def claims_panel(issue: m.Issue) -> Panel:
    claims = (
        m.FileClaim.objects.filter(issue=issue, released_at__isnull=True)
        .select_related("agent", "session__agent")
        .annotate(holder_state=display.session_state("session__"))
        .order_by("path")[:SHOWN]
    )
    return Panel(
        title="Held file claims",
        headers=("path", "holder", "claimed"),
        rows=[
            (
                display.claim_path(c.path, 70),
                display.holder(c, stacked=False),
                display.when(c.claimed_at),
            )
            for c in claims
        ],
        more=[("all file claims", changelist(m.FileClaim, f"issue__id__exact={issue.pk}"))],
        empty="No file claims held.",
    )


def conflict_side(issue: m.Issue, agent: m.Agent | None) -> SafeString:
    address = reverse("admin:coordination_issue_change", args=[issue.pk])
    name = agent.name if agent is not None else "no agent"
    return format_html('<a href="{}" title="{}">#{}</a> · {}', address, issue.title, issue.pk, name)


def conflicts_panel(issue: m.Issue) -> Panel:
    conflicts = (
        m.ClaimConflict.objects.filter(
            Q(rejected_issue=issue) | Q(holding_issue=issue), workspace_id=issue.workspace_id
        )
        .select_related("rejected_issue", "rejected_agent", "holding_issue", "holding_agent")
        .order_by("-occurred_at", "-pk")[:SHOWN]
    )
    return Panel(
        title="Recent conflicts",
        headers=("when", "path", "wanted by", "held by", "outcome"),
        rows=[
            (
                display.when(c.occurred_at),
                display.clip(c.path, 50, keep_end=True),
                conflict_side(c.rejected_issue, c.rejected_agent),
                conflict_side(c.holding_issue, c.holding_agent),
                "forced" if c.forced else "refused",
            )
            for c in conflicts
        ],
        more=[
            (
                "all it was refused",
                changelist(m.ClaimConflict, f"rejected_issue__id__exact={issue.pk}"),
            ),
            ("all it held", changelist(m.ClaimConflict, f"holding_issue__id__exact={issue.pk}")),
        ],
        empty="No conflicts.",
    )


def body(text: str, limit: int = 400) -> SafeString:
    """A message as written (its line breaks kept), long ones cut, the whole on hover."""
    if len(text) <= limit:
        return format_html('<span class="body">{}</span>', text)
    return format_html('<span class="body" title="{}">{}…</span>', text, text[: limit - 1])


def messages_panel(issue: m.Issue) -> Panel:
    scope = issue_scope(issue.pk)
    posts = (
        m.Message.objects.filter(workspace_id=issue.workspace_id, scope=scope)
        .select_related("agent")
        .order_by("-created_at", "-pk")[:SHOWN]
    )
    return Panel(
        title="Recent messages",
        headers=("when", "from", "message"),
        rows=[
            (
                display.when(p.created_at),
                p.agent.name if p.agent is not None else "Projektor",
                body(p.body),
            )
            for p in posts
        ],
        more=[("all messages", changelist(m.Message, f"scope={scope}"))],
        empty="No messages.",
    )


def panels(issue: m.Issue) -> list[Panel]:
    return [claims_panel(issue), conflicts_panel(issue), messages_panel(issue)]
