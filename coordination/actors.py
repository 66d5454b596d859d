"""Who did something, in one wording for every place a person reads it: the issue
timeline, the admin, the messages the services post.

A change is made by a person (an operator, by username), an agent (by name: its
session's, or an agent key's), or an API key that names no agent (a fleet key, by
its name). The event log records the agent in the event's ``agent``; a person or a
key without an agent in its ``data`` (``operator``, ``key``), and a release's taker
in ``data.by`` the same way (docs/api.md, "Events"). ``recorded`` writes those
fields; ``of_event`` and ``of_taker`` read them back; ``Actor.words`` says them.
"""

from dataclasses import dataclass
from typing import Any, Literal

from coordination.models import ApiKey, Event

Kind = Literal["operator", "agent", "key", "unknown"]


@dataclass(frozen=True)
class Actor:
    kind: Kind
    name: str = ""

    @property
    def words(self) -> str:
        """``operator ops``, ``erin``, ``key fleet``; ``someone`` only when nothing
        recorded who (an event older than these fields)."""
        if self.kind == "operator":
            return f"operator {self.name}"
        if self.kind == "key":
            return f"key {self.name}"
        if self.kind == "agent":
            return self.name
        return "someone"

    @property
    def at_sentence_start(self) -> str:
        """``words`` opening a sentence: ``Operator ops``; an agent's name as it is."""
        words = self.words
        return words if self.kind == "agent" else words[:1].upper() + words[1:]


def operator(username: str) -> Actor:
    return Actor("operator", username)


def key_name(key: ApiKey) -> str:
    """A key by its name, or by its prefix when it has none."""
    return key.name or f"{key.key_prefix}…"


def recorded(
    *, agent_known: bool, operator: str | None = None, key: ApiKey | None = None
) -> dict[str, str]:
    """The ``data`` fields naming who made a change that names no agent: the person
    (``operator``), else the key. Nothing when an agent made it: the event's ``agent``
    says so."""
    if agent_known:
        return {}
    if operator:
        return {"operator": operator}
    if key is not None:
        return {"key": key_name(key)}
    return {}


def of_fields(agent: str | None, fields: dict[str, Any]) -> Actor:
    """The actor from an agent's name and the ``operator``/``key`` fields beside it."""
    if fields.get("operator"):
        return Actor("operator", str(fields["operator"]))
    if agent:
        return Actor("agent", agent)
    if fields.get("key"):
        return Actor("key", str(fields["key"]))
    return Actor("unknown")


def of_event(event: Event) -> Actor:
    """Who made the change an event records (its ``agent`` selected with it)."""
    return of_fields(event.agent.name if event.agent else None, event.data or {})


def of_taker(by: dict[str, Any]) -> Actor:
    """Who took what a release's holder lost (``data.by``)."""
    return of_fields(by.get("agent"), by)
