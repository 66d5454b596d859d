"""How the admin shows coordination state in little room: short times, clipped text
with the whole of it on hover, and one holder cell (agent, session, state badge).

Cells are clipped to a bounded length, and may break at their spaces (a time
before its hour, a holder after its agent): squeezed, the table shrinks its
columns to their longest word instead of scrolling sideways, whatever the ids.

A session's state is one of live / stalled / stale / ended, derived from the one TTL
predicate: live while it heartbeats within the TTL, stalled while it heartbeats but
has made no progress for ``PROJEKTOR_STALL_AFTER_SECONDS`` (invariant 17 (stalled is derived): it
keeps what it holds), stale once it stopped without ending (it crashed; what it holds is
reclaimable), ended when it said goodbye.
"""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin
from django.db.models import Case, CharField, Q, Value, When
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from coordination.liveness import live_q, stalled_q
from coordination.models import Agent, AgentSession

LIVE, STALLED, STALE, ENDED = "live", "stalled", "stale", "ended"
NONE = "—"


def session_state(prefix: str = "") -> Case:
    """live / stalled / stale / ended of the session at ``prefix`` (``"session__"``
    from a lease, claim, lock or run); NULL when there is no session."""
    return Case(
        When(stalled_q(prefix), then=Value(STALLED)),
        When(live_q(prefix), then=Value(LIVE)),
        When(Q(**{f"{prefix}status": AgentSession.Status.ENDED}), then=Value(ENDED)),
        When(Q(**{f"{prefix}status": AgentSession.Status.ACTIVE}), then=Value(STALE)),
        default=None,
        output_field=CharField(),
    )


def when(moment: datetime | None) -> SafeString | str:
    """``Nov 3 14:02`` (this year) or ``2025-11-03``; the full time on hover."""
    if moment is None:
        return NONE
    local = timezone.localtime(moment)
    this_year = local.year == timezone.now().year
    # No break inside the date: squeezed, the hour goes below it.
    shown = f"{local:%b}\u00a0{local.day} {local:%H:%M}" if this_year else f"{local:%Y-%m-%d}"
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        local.isoformat(),
        local.strftime("%Y-%m-%d %H:%M:%S %Z"),
        shown,
    )


def took(start: datetime | None, end: datetime | None) -> SafeString | str:
    """How long from ``start`` to ``end``: ``45 s``, ``12 min``, ``3 h 05``, ``2 d``."""
    if start is None or end is None:
        return NONE
    seconds = max(0, int((end - start).total_seconds()))
    if seconds < 60:
        text = f"{seconds} s"
    elif seconds < 3600:
        text = f"{seconds // 60} min"
    elif seconds < 86400:
        text = f"{seconds // 3600} h {seconds % 3600 // 60:02d}"
    else:
        text = f"{seconds // 86400} d"
    return format_html('<span title="{}">{}</span>', timezone.localtime(end).isoformat(), text)


def clip(text: str, limit: int, *, keep_end: bool = False, wrap: bool = False) -> SafeString | str:
    """``text`` cut to ``limit`` characters with an ellipsis, the whole on hover.
    Paths keep their end (``keep_end``): the file name tells them apart. Titles
    may break at their spaces (``wrap``); names and paths stay on one line."""
    if not text:
        return NONE
    kind = "wrap" if wrap else "nowrap"
    if len(text) <= limit:
        return format_html('<span class="{}">{}</span>', kind, text)
    shown = "…" + text[1 - limit :] if keep_end else text[: limit - 1] + "…"
    return format_html('<span class="clip {}" title="{}">{}</span>', kind, text, shown)


def claim_path(path: str, limit: int) -> SafeString:
    """A claimed path, clipped; a directory claim (``src/api/``, invariant 11 (overlap)) with a
    ``dir`` mark before it, since it holds everything under it."""
    shown = clip(path, limit, keep_end=True)
    if not path.endswith("/"):
        return format_html("{}", shown)
    return format_html(
        '<span class="kind-dir" title="directory claim: holds every path under {}">dir</span> {}',
        path,
        shown,
    )


def clipped(
    attr: str,
    width: int,
    *,
    keep_end: bool = False,
    wrap: bool = False,
    description: str | None = None,
) -> Callable[[Any, Any], SafeString | str]:
    """A list column: ``attr`` (``"project.key"`` follows a relation) clipped to
    ``width`` characters, sorted by it; prose (``wrap``) may break at its spaces."""

    def column(model_admin: Any, obj: Any) -> SafeString | str:
        value = obj
        for part in attr.split("."):
            value = getattr(value, part, None) if value is not None else None
        return clip("" if value is None else str(value), width, keep_end=keep_end, wrap=wrap)

    name = attr.split(".")[-1].replace("_", " ")
    ordering = attr.replace(".", "__")
    return admin.display(description=description or name, ordering=ordering)(column)


def dated(attr: str, description: str) -> Callable[[Any, Any], SafeString | str]:
    """A list column: the time ``attr``, short (``when``), sorted by it."""

    def column(model_admin: Any, obj: Any) -> SafeString | str:
        return when(getattr(obj, attr))

    return admin.display(description=description, ordering=attr)(column)


def issue_label(issue: Any, limit: int = 34) -> SafeString | str:
    """``#12 Title…``, the whole title on hover; ``limit=0``: ``#12`` alone."""
    if not limit:
        return format_html('<span class="nowrap" title="{}">#{}</span>', issue.title, issue.pk)
    return clip(str(issue), limit, wrap=True)


def admin_link(row: Any, text: Any) -> SafeString:
    """``text`` linked to ``row``'s admin page."""
    address = reverse(f"admin:coordination_{row._meta.model_name}_change", args=[row.pk])
    return format_html('<a class="nowrap" href="{}">{}</a>', address, text)


def badge(state: str | None) -> SafeString:
    state = state or "none"
    label = "no session" if state == "none" else state
    return format_html('<span class="state state-{}">{}</span>', state, label)


AGENT_WIDTH = 20  # characters of an agent's name in a list's cell
WORKSPACE_WIDTH = 12  # characters of a workspace's slug in a list's cell (its filter has all)


def session_label(session: AgentSession) -> SafeString:
    """``<agent> · session <id>``, breaking after the agent (a long name clipped)."""
    name = session.agent.name
    if len(name) > AGENT_WIDTH:
        name = name[: AGENT_WIDTH - 1] + "…"
    return format_html(
        '<span class="nowrap">{} ·</span> <span class="nowrap">session {}</span>', name, session.pk
    )


def session_link(session: AgentSession | None, agent: Agent | None = None) -> SafeString | str:
    """``<agent> · session <id>``, linked to the session's page (a long agent name
    clipped, the whole label on hover)."""
    if session is None:
        return clip(agent.name, AGENT_WIDTH) if agent is not None else NONE
    address = reverse("admin:coordination_agentsession_change", args=[session.pk])
    return format_html(
        '<a href="{}" title="{}">{}</a>', address, str(session), session_label(session)
    )


def holder(row: Any, *, stacked: bool = True) -> SafeString:
    """The holder cell of a lease, claim, lock or run: agent · session, then the
    session's state (``holder_state``, annotated with ``session_state``) below it
    (``stacked``, for a list's narrow column) or beside it."""
    agent = getattr(row, "agent", None) or (row.session.agent if row.session else None)
    return format_html(
        "{}{}{}",
        session_link(row.session, agent),
        mark_safe("<br>") if stacked else " ",
        badge(getattr(row, "holder_state", None)),
    )


def released(row: Any) -> SafeString | str:
    """``held``, or when it was released and why (the reason on its own line)."""
    if row.released_at is None:
        return mark_safe('<span class="held">held</span>')
    return format_html(
        '{}<br><span class="quiet">{}</span>',
        when(row.released_at),
        row.get_release_reason_display(),
    )


def ago(moment: datetime | None, now: datetime | None = None) -> str:
    """``12 s ago``: for a heartbeat, next to its time."""
    if moment is None:
        return ""
    seconds = int(((now or timezone.now()) - moment) / timedelta(seconds=1))
    if seconds < 120:
        return f"{max(seconds, 0)} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    if seconds < 172800:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} d ago"


def units_and_slots(hold: Any) -> SafeString:
    """A resource hold's units, its slot numbers below them (``slots 0, 1``), every one
    on hover."""
    slots = ", ".join(str(slot) for slot in hold.slots)
    noun = "slot" if len(hold.slots) == 1 else "slots"
    return format_html(
        '{}<br><span class="quiet">{}</span>', hold.units, clip(f"{noun} {slots}", 16)
    )
