"""An issue's timeline in words: its events (docs/api.md, "Events") and the conflicts
other issues met on it, newest first.

Pure: rows in, entries out. An entry is a list of parts, each plain text or a link
(an issue, an agent, a path), so the template escapes everything and links what it names.
Who did something is said as everywhere else (``coordination.actors``): an agent by
its name (a link), a person as ``operator <username>``, a key as ``key <name>``.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from coordination import actors
from coordination.actors import Actor
from coordination.models import ClaimConflict, Event
from heatmap.landings import detail_tail
from heatmap.resources import slot_words
from heatmap.story import IssueStory

# "<Lease|Claims> of <holder> <how it was released>", with the reason as recorded.
RELEASED = {
    "released": "released",
    "agent_ended": "released agent_ended (its session ended cleanly)",
    "expired": "released expired (its holder stopped heartbeating)",
    "overridden": "released overridden",
    "issue_closed": "released issue_closed (the issue was closed)",
    "worktree_unresolved": "released worktree_unresolved (its run had no worktree)",
    "max_age": "released max_age (past its project's lease age cap)",
}
# The colour of an entry's tag: trouble red, progress blue, the rest grey.
TONE = {
    "claims.refused": "bad",
    "wip.denied": "bad",
    "run.not_started": "bad",
    "conflict": "bad",
    "resource.refused": "bad",
    "lease.granted": "good",
    "claims.granted": "good",
    "resource.acquired": "good",
    "landing.rejected": "bad",
    "landing.landed": "good",
    "issue.transitioned": "info",
}


@dataclass(frozen=True)
class Part:
    text: str
    url: str = ""
    code: bool = False  # a path: shown in monospace


@dataclass(frozen=True)
class Entry:
    at: datetime
    kind: str  # the event type, or "conflict"
    parts: list[Part]
    detail: str = ""  # a message's body, a run's error detail

    @property
    def tone(self) -> str:
        return TONE.get(self.kind, "")


@dataclass(frozen=True)
class Links:
    issue: Callable[[int], str]
    agent: Callable[[str], str]
    path: Callable[[str], str]


def timeline(story: IssueStory, links: Links) -> list[Entry]:
    entries = [describe(event, story, links) for event in story.events]
    entries += [conflict_entry(row, story.issue.pk, links) for row in story.conflicts]
    entries.sort(key=lambda entry: entry.at, reverse=True)
    return entries


def agent_part(name: str | None, links: Links, fallback: str = "someone") -> Part:
    return Part(name, links.agent(name)) if name else Part(fallback)


def actor_part(actor: Actor, links: Links, *, first: bool = False) -> Part:
    """Who did it: an agent links to its page; ``first`` opens a sentence."""
    if actor.kind == "agent":
        return Part(actor.name, links.agent(actor.name))
    return Part(actor.at_sentence_start if first else actor.words)


def issue_part(issue_id: int | None, title: str, links: Links) -> Part:
    if issue_id is None:
        return Part("an issue")
    return Part(f"#{issue_id} {title}".strip(), links.issue(issue_id))


def path_parts(paths: list[str], links: Links, *, limit: int = 8) -> list[Part]:
    parts: list[Part] = []
    for index, path in enumerate(paths[:limit]):
        if index:
            parts.append(Part(", "))
        parts.append(Part(path, links.path(path), code=True))
    if len(paths) > limit:
        parts.append(Part(f" and {len(paths) - limit} more"))
    return parts


def taker(reason: str, by: dict[str, Any] | None, links: Links) -> list[Part]:
    """``data.by`` of a release: who took it; a dead holder's was taken over."""
    if not by:
        return []
    actor = actors.of_taker(by)
    unnamed = actor.kind == "unknown"  # a claim of no session took it
    who = Part("a claimer without a session") if unnamed else actor_part(actor, links)
    return [Part("; taken over by " if reason == "expired" else " by "), who]


def released(what: str, holder: Part, data: dict[str, Any], links: Links) -> list[Part]:
    """``Lease of oldie released expired (its holder stopped heartbeating); taken over
    by newbie``."""
    reason = str(data.get("reason", ""))
    how = RELEASED.get(reason, f"released {reason}")
    return [Part(f"{what} of "), holder, Part(f" {how}"), *taker(reason, data.get("by"), links)]


# How a link reads between its two issues ("#3 blocks #4").
LINK_VERBS = {
    "blocks": "blocks",
    "parent_of": "is the parent of",
    "relates_to": "relates to",
    "discovered_from": "was discovered from",
}


def by_actor(event: Event, links: Links) -> list[Part]:
    """ " by <who>", or nothing when the event did not record who."""
    actor = actors.of_event(event)
    return [Part(" by "), actor_part(actor, links)] if actor.kind != "unknown" else []


def describe(event: Event, story: IssueStory, links: Links) -> Entry:
    data: dict[str, Any] = event.data or {}
    who = actors.of_event(event)
    actor, first = actor_part(who, links), actor_part(who, links, first=True)
    # A release's event names the holder that lost it, not who released it.
    holder = agent_part(event.agent.name if event.agent else None, links, "a holder with no agent")
    kind = event.type
    parts: list[Part]
    detail = ""
    if kind == "issue.created":
        parts = [Part("Created"), *by_actor(event, links)]
    elif kind == "issue.transitioned":
        parts = [Part(f"Moved from {data.get('from')} to {data.get('to')}"), Part(" by "), actor]
    elif kind == "lease.granted":
        parts = [Part("Leased by "), actor, Part(f" (fence {data.get('fence')})")]
    elif kind == "lease.released":
        parts = released("Lease", holder, data, links)
    elif kind == "claims.granted":
        parts = [first, Part(" claimed "), *path_parts(list(data.get("paths", [])), links)]
    elif kind == "claims.released":
        parts = [
            *released("Claims", holder, data, links),
            Part(": "),
            *path_parts(list(data.get("paths", [])), links),
        ]
    elif kind == "claims.refused":
        parts = [first, Part(" was refused: ")]
        for index, conflict in enumerate(data.get("conflicts", [])[:8]):
            if index:
                parts.append(Part("; "))
            parts += [
                Part(conflict.get("path", ""), links.path(conflict.get("path", "")), code=True),
                Part(" held by "),
                issue_part(conflict.get("issue"), "", links),
                Part(" ("),
                agent_part(conflict.get("agent"), links, "no session"),
                Part(")"),
            ]
    elif kind == "wip.denied":
        parts = [
            first,
            Part(f" was refused the lease: the project is at its WIP cap ({data.get('limit')})"),
        ]
    elif kind in ("run.dispatched", "run.finished", "run.not_started"):
        run = story.runs.get(data.get("run"))  # type: ignore[arg-type]
        if kind == "run.dispatched":
            where = f" on worktree {data.get('worktree')}" if data.get("worktree") else ""
            parts = [
                Part(f"Run {data.get('run')} dispatched to "),
                actor,
                Part(f" ({data.get('lock_mode')} lock{where})"),
            ]
        elif kind == "run.finished":
            parts = [Part(f"Run {data.get('run')} finished: {data.get('outcome')}")]
        else:
            parts = [
                Part(f"Run {data.get('run')} of "),
                actor,
                Part(f" did not start: {data.get('error')}"),
            ]
            detail = run.error_detail if run is not None else ""
    elif kind == "message.posted":
        message = story.messages.get(data.get("message"))  # type: ignore[arg-type]
        parts = [first, Part(f" posted to {data.get('scope')}")]
        detail = message.body if message is not None else "(message deleted)"
    elif kind in ("issue.linked", "issue.unlinked"):
        parts = [
            Part("Linked: " if kind == "issue.linked" else "Link removed: "),
            issue_part(data.get("source"), "", links),
            Part(f" {LINK_VERBS.get(str(data.get('type')), data.get('type'))} "),
            issue_part(data.get("target"), "", links),
            *by_actor(event, links),
        ]
    elif kind == "issue.unblocked":
        resolved_by = data.get("resolved_by")
        parts = (
            [Part("Unblocked: "), issue_part(resolved_by, "", links), Part(" was resolved")]
            if resolved_by
            else [Part("Unblocked: its last blocking link was removed")]
        )
    elif kind.startswith("resource."):
        parts = resource_parts(kind, data, first, holder, links)
    elif kind.startswith("landing."):
        parts = landing_parts(kind, data, first, actor)
        detail = detail_tail(str(data.get("detail", "")), 8) if kind == "landing.rejected" else ""
    else:
        parts = [Part(kind), Part(" by "), actor]
    return Entry(at=event.occurred_at, kind=kind, parts=parts, detail=detail)


def units_of(data: dict[str, Any], name: Part) -> list[Part]:
    """``2 units of db:test`` (one: the resource alone)."""
    units = data.get("units")
    return [Part(f"{units} units of "), name] if units not in (None, 1) else [name]


def resource_parts(
    kind: str, data: dict[str, Any], first: Part, holder: Part, links: Links
) -> list[Part]:
    """A resource's hold taken, released or refused for the issue (invariant 20 (resources
    are counted)): ``coder-1 acquired 2 units of db:test (slots 0–1, fence 3)``."""
    name = Part(str(data.get("resource", "a resource")), code=True)
    if kind == "resource.acquired":
        slots = slot_words(list(data.get("slots", [])))
        fence = Part(f" ({slots}, fence {data.get('fence')})")
        return [first, Part(" acquired "), *units_of(data, name), fence]
    if kind == "resource.released":
        reason = str(data.get("reason", ""))
        how = RELEASED.get(reason, f"released {reason}")
        parts = [Part("Hold on "), name, Part(" of "), holder, Part(f" {how}")]
        parts += taker(reason, data.get("by"), links)
        if data.get("operator"):
            parts += [Part(" by "), actor_part(actors.operator(str(data["operator"])), links)]
        return parts
    if kind == "resource.refused":
        held = [
            agent_part(hold.get("agent"), links, "a session")
            for hold in data.get("holders", [])[:8]
        ]
        parts = [first, Part(" was refused "), *units_of(data, name)]
        parts.append(Part(f": {data.get('available')} free"))
        if data.get("waiting"):
            parts.append(Part(f", {data.get('waiting')} waiting"))
        for index, who in enumerate(held):
            parts += [Part(", held by " if index == 0 else ", "), who]
        return parts
    return [Part(kind), Part(" "), name]


def landing_parts(kind: str, data: dict[str, Any], first: Part, actor: Part) -> list[Part]:
    """The issue's branch in the landing queue (invariant 21 (the default branch is always
    green)): queued, under test in a batch, landed as a commit, or rejected and why."""
    entry = f"entry {data.get('landing')}"
    if kind == "landing.queued" and data.get("reason") == "tester_gone":
        return [Part(f"Landing {entry} back in line: its tester stopped heartbeating (batch "
                     f"fence {data.get('returned_by')}); put back by the next take, "),
                actor]  # fmt: skip
    if kind == "landing.queued" and data.get("returned_by") is not None:
        return [Part(f"Landing {entry} back in line: its batch (fence "
                     f"{data.get('returned_by')}) was returned by "), actor]  # fmt: skip
    if kind == "landing.queued":
        commit = Part(str(data.get("commit", ""))[:12], code=True)
        branch = Part(str(data.get("branch", "")), code=True)
        return [first, Part(" queued "), branch, Part(" at "), commit, Part(f" to land ({entry})")]
    if kind == "landing.testing":
        batch = list(data.get("batch", []))
        others = f", with {len(batch) - 1} other entr{'y' if len(batch) == 2 else 'ies'}"
        size = others if len(batch) > 1 else ""
        return [Part(f"Landing {entry} under test by "), actor,
                Part(f" (batch fence {data.get('fence')}{size})")]  # fmt: skip
    if kind == "landing.landed":
        commit = Part(str(data.get("commit", ""))[:12], code=True)
        return [Part(f"Landed ({entry}) as "), commit, Part(" by "), actor]
    if kind == "landing.rejected":
        return [Part(f"Landing {entry} rejected {data.get('reason')}"), Part(" by "), actor]
    return [Part(kind), Part(" by "), actor]


def conflict_entry(row: ClaimConflict, issue_id: int, links: Links) -> Entry:
    path = [Part(row.path, links.path(row.path), code=True)]
    if row.holding_issue_id == issue_id:  # another issue wanted what this one held
        other = issue_part(row.rejected_issue_id, row.rejected_issue.title, links)
        who = agent_part(row.rejected_agent.name if row.rejected_agent else None, links)
        verb = " took " if row.forced else " was refused "
        tail = " from this issue by force" if row.forced else ", held here"
        parts = [who, Part(" on "), other, Part(verb), *path, Part(tail)]
    else:  # this issue took a path by force
        other = issue_part(row.holding_issue_id, row.holding_issue.title, links)
        who = agent_part(row.holding_agent.name if row.holding_agent else None, links, "no session")
        parts = [Part("Forced "), *path, Part(" away from "), other, Part(" ("), who, Part(")")]
    return Entry(at=row.occurred_at, kind="conflict", parts=parts)
