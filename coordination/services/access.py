"""Who may do what: the one place that decides it (invariant 13 (the key is the actor), the key is
the actor).

Every REST view passes through it (``coordination.api.access.KeyAccess``, a
permission of every API view), and so does every MCP tool, whose call is its REST
call. The check runs before the view calls its service: a refusal is 403
``forbidden`` and was never an attempt, so it changes nothing (no conflict row, no
WIP denial, no event).

The caller is its key; a person (logged in) acts as a fleet key that may force does,
and only a person passes the workflow's human gates. What each kind may do:

- ``fleet``: everything, for any agent of the workspace (``force`` unless minted
  without ``can_force``);
- ``agent``: read everything, create, edit and move issues, and act as its own agent:
  register and start work as it, and name only its agent's sessions (a heartbeat, a
  lease, a claim, a run, a message); ``force`` only with ``can_force``; never write
  projects, worktrees, keys or webhooks, nor close an issue whose lease or claims
  another agent holds (closing releases them);
- ``read``: every GET but the key list and webhooks, the read-only file check, and
  revoking itself.

These checks read nothing for a fleet key or a person: the key was loaded, with its
agent, by the authentication. An agent key's session check is one indexed read
(``sql.session_agent``); the heartbeat's is folded into its UPDATE instead
(``session_owner``). A session's agent never changes, so no check can go stale.
"""

import enum

from coordination.db import sql
from coordination.db.rows import fetchone
from coordination.errors import Forbidden, InvalidInput
from coordination.models import Agent, ApiKey, FileClaim, Issue, IssueLease

Kind = ApiKey.Kind


class Act(enum.StrEnum):
    """What a call does, as far as who may do it is concerned."""

    READ = "read"  # a GET, or a POST that changes nothing (the file check)
    WORK = "work"  # as an agent: sessions, leases, file claims, runs, messages, work
    TRACK = "track"  # create, edit and move issues
    CONFIGURE = "configure"  # projects and worktrees
    ADMINISTER = "administer"  # keys (mint, list) and webhooks
    REVOKE = "revoke"  # revoke a key: itself, or any for a fleet key


MAY: dict[str, frozenset[Act]] = {
    Kind.FLEET: frozenset(Act),
    Kind.AGENT: frozenset({Act.READ, Act.WORK, Act.TRACK, Act.REVOKE}),
    Kind.READ: frozenset({Act.READ, Act.REVOKE}),
}

WHAT: dict[Act, str] = {
    Act.READ: "read",
    Act.WORK: "act for an agent",
    Act.TRACK: "create, edit or move issues",
    Act.CONFIGURE: "write projects or worktrees",
    Act.ADMINISTER: "manage keys or webhooks",
    Act.REVOKE: "revoke keys",
}


def kind_of(key: ApiKey | None) -> str:
    """A person (no key) acts as a fleet key."""
    return key.kind if key is not None else Kind.FLEET


def is_agent_key(key: ApiKey | None) -> bool:
    return key is not None and key.kind == Kind.AGENT


def describe(key: ApiKey | None) -> str:
    if key is None:
        return "A person"
    if is_agent_key(key):
        return f"The agent key of {agent_name_of(key)!r}"
    return f"A {key.kind} key"


def agent_name_of(key: ApiKey) -> str:
    assert key.agent is not None  # an agent key has its agent (api_key_kind_agent)
    return key.agent.name


def allow(key: ApiKey | None, act: Act) -> None:
    """Refuse an act the key's kind may not do."""
    if act not in MAY[kind_of(key)]:
        raise Forbidden(f"{describe(key)} may not {WHAT[act]}.")


def allow_unlisted(key: ApiKey | None) -> None:
    """A route with no rule yet: fleet keys and people only (failing closed)."""
    if kind_of(key) != Kind.FLEET:
        raise Forbidden(f"{describe(key)} may not make this call: it has no access rule yet.")


def check_agent(key: ApiKey | None, name: object) -> None:
    """An agent key acts as its own agent: another name in the body is refused."""
    if key is None or not is_agent_key(key) or not isinstance(name, str):
        return
    if name != agent_name_of(key):
        raise Forbidden(f"{describe(key)} cannot act as agent {name!r}.")


def acting_agent(key: ApiKey | None, name: str | None) -> str:
    """The agent a register or start_work acts as: the one named, or an agent key's."""
    if name:
        return name
    if key is not None and is_agent_key(key):
        return agent_name_of(key)
    raise InvalidInput("agent: This field is required.", field="agent")


def author_of(key: ApiKey | None) -> Agent | None:
    """Who signs what an agent key posts without a session: its agent."""
    return key.agent if key is not None and is_agent_key(key) else None


def require_session(key: ApiKey | None, session_id: int | None) -> None:
    """With an agent key, a file claim or release names the session it acts in: a
    claim of no session would be held by no agent, and a release of all the issue's
    claims would release other agents' too."""
    if session_id is None and is_agent_key(key):
        raise InvalidInput(
            "With an agent key, name the session this call acts in.", field="session"
        )


def check_force(key: ApiKey | None) -> None:
    if key is not None and not key.can_force:
        raise Forbidden(f"{describe(key)} may not force; it was minted without can_force.")


def session_owner(key: ApiKey | None) -> int | None:
    """The agent whose sessions an agent key may name, for a statement to match on
    (the heartbeat folds it into its UPDATE); ``None``: any agent's."""
    return key.agent_id if key is not None and is_agent_key(key) else None


def check_session(key: ApiKey | None, session_id: int) -> None:
    """An agent key names only its agent's sessions. A session that does not exist
    in the workspace is left to the call (its 404 or 400, as for any key)."""
    owner = session_owner(key)
    if owner is None or key is None:
        return
    row = fetchone(sql.session_agent(workspace_id=key.workspace_id, session_id=session_id))
    if row is not None and row[0] != owner:
        raise not_own_session(session_id)


def not_own_session(session_id: int) -> Forbidden:
    return Forbidden(
        f"An agent key acts only in its agent's sessions: session {session_id} is another agent's."
    )


def check_run(key: ApiKey | None, run_id: int) -> None:
    """An agent key finishes only the runs of its agent's sessions."""
    owner = session_owner(key)
    if owner is None or key is None:
        return
    row = fetchone(sql.run_agent(workspace_id=key.workspace_id, run_id=run_id))
    if row is not None and row[0] != owner:
        raise Forbidden(f"{describe(key)} cannot finish run {run_id}, another agent's.")


def check_close(key: ApiKey | None, issue_id: int, to: object) -> None:
    """Closing an issue releases its lease and file claims (``issue_closed``): an agent
    key may not close one while another agent holds any of them. A ``to`` that is not
    a status at all is left to the call's validation (its 400)."""
    owner = session_owner(key)
    if owner is None or key is None or not isinstance(to, str):
        return
    if to not in Issue.CLOSED_STATUSES:
        return
    held = {"workspace_id": key.workspace_id, "issue_id": issue_id, "agent_id__isnull": False}
    others = IssueLease.objects.unreleased().filter(**held).exclude(agent_id=owner).exists() or (
        FileClaim.objects.unreleased().filter(**held).exclude(agent_id=owner).exists()
    )
    if others:
        raise Forbidden(
            f"{describe(key)} cannot close issue {issue_id}: another agent holds its lease "
            "or file claims, and closing would release them."
        )


def check_revoke(key: ApiKey | None, key_id: int) -> None:
    """A fleet key (or a person) revokes any key of its workspace; any key itself."""
    if kind_of(key) != Kind.FLEET and key is not None and key.pk != key_id:
        raise Forbidden(f"{describe(key)} may revoke only itself.")
