"""Messages: posts to a scope of the workspace (``issue:<id>``, ``agent:<name>``,
``project:<key>``). A scope must name something that exists, so a typo is a 400
instead of a post nobody will ever read."""

import re
from collections.abc import Sequence

from coordination import actors
from coordination.errors import InvalidInput, NotFound
from coordination.models import (
    Agent,
    AgentSession,
    ApiKey,
    EventType,
    Issue,
    Message,
    Project,
    Workspace,
)
from coordination.selectors import lookups
from coordination.selectors.messages import messages
from coordination.services import events

MAX_BODY_CHARS = 10_000
SCOPE_KINDS = ("issue", "agent", "project")
# Canonical ids only (no sign, no leading zero), so one issue has one scope string
# and ``?scope=`` finds every post to it; 18 digits keep it within bigint.
ISSUE_ID = re.compile(r"[1-9][0-9]{0,17}")


def issue_scope(issue_id: int) -> str:
    return f"issue:{issue_id}"


def check_scope(*, workspace: Workspace, scope: str) -> str:
    """Return ``scope`` if it names a kind Projektor knows and a target that exists
    in the workspace; any other scope is ``InvalidInput`` (400)."""
    kind, colon, target = scope.partition(":")
    if not colon or kind not in SCOPE_KINDS or not target:
        raise InvalidInput(
            f"Scope {scope!r} is not one of issue:<id>, agent:<name>, project:<key>.",
            field="scope",
        )
    if kind == "issue":
        if not ISSUE_ID.fullmatch(target):
            raise InvalidInput(f"Scope {scope!r} does not name an issue id.", field="scope")
        try:
            lookups.get_issue(workspace, int(target))
        except NotFound:  # a body's reference, not the URL's object: 400
            raise InvalidInput(f"Issue {target} does not exist.", field="scope") from None
    elif kind == "agent":
        lookups.get_agent(workspace, target)
    else:
        lookups.get_project(workspace, target)
    return scope


def check_body(body: str) -> str:
    if not 1 <= len(body) <= MAX_BODY_CHARS:
        raise InvalidInput(
            f"A message body has 1 to {MAX_BODY_CHARS} characters, not {len(body)}.",
            field="body",
        )
    if "\x00" in body:  # PostgreSQL text cannot hold it; refuse on both backends alike
        raise InvalidInput("A message body cannot contain U+0000.", field="body")
    try:
        body.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("A message body must be valid Unicode text.", field="body") from None
    return body


def post_message(
    *,
    workspace: Workspace,
    scope: str,
    body: str,
    session_id: int | None = None,
    author: Agent | None = None,
    key: ApiKey | None = None,
) -> Message:
    """Post ``body`` to ``scope``, signed by ``session`` (and its agent) when given, else
    by ``author`` (an agent key's agent: invariant 13 (the key is the actor), the key is the actor),
    else by ``key`` (a key that names no agent: its name, in the post's event)."""
    session = lookups.get_session(workspace, session_id) if session_id is not None else None
    return record_message(
        workspace=workspace,
        scope=check_scope(workspace=workspace, scope=scope),
        body=check_body(body),
        session=session,
        author=author,
        key=key,
    )


def record_message(
    *,
    workspace: Workspace,
    scope: str,
    body: str,
    session: AgentSession | None,
    author: Agent | None = None,
    operator: str | None = None,
    key: ApiKey | None = None,
) -> Message:
    """Write a post whose scope and body the caller has already checked, and announce
    it (``message.posted``, naming the scope's issue or project when it has one). The
    author is the session's agent, else ``author``; a post no agent signs names the
    person (``operator``) or the key that made it in its event (``coordination.actors``)."""
    with events.change():
        message = Message.objects.create(
            workspace=workspace,
            scope=scope,
            body=body,
            session=session,
            agent_id=session.agent_id if session is not None else getattr(author, "pk", None),
        )
        announce_message(message, operator=operator, key=key)
    return messages(workspace).get(pk=message.pk)


def announce_message(
    message: Message, *, operator: str | None = None, key: ApiKey | None = None
) -> None:
    """``message.posted``, naming the scope's issue or project when it has one (the
    admin's add form announces its posts too), and who posted it. Inside
    ``events.change()``."""
    kind, _, target = message.scope.partition(":")
    events.record(
        message.workspace_id,
        EventType.MESSAGE_POSTED,
        project_id=scope_project(message.workspace, kind, target),
        issue_id=int(target) if kind == "issue" and ISSUE_ID.fullmatch(target) else None,
        session_id=message.session_id,
        agent_id=message.agent_id,
        data={"message": message.pk, "scope": message.scope}
        | actors.recorded(agent_known=message.agent_id is not None, operator=operator, key=key),
    )


def scope_project(workspace: Workspace, kind: str, target: str) -> int | None:
    """The project a scope belongs to: its issue's, or the project it names."""
    if kind == "issue" and ISSUE_ID.fullmatch(target):
        return Issue.objects.filter(pk=int(target)).values_list("project_id", flat=True).first()
    if kind == "project":
        return (
            Project.objects.filter(workspace=workspace, key=target)
            .values_list("id", flat=True)
            .first()
        )
    return None


def announce_override(
    *,
    workspace: Workspace,
    issue_id: int,
    session: AgentSession | None,
    taken: Sequence[tuple[str, int, str | None]],
) -> None:
    """Tell everyone concerned by a forced claim at once, not at their next failed
    write (invariant 5 (all-or-nothing)): the claiming issue (whose files it took), each displaced
    issue and each displaced agent (which of its paths, by which issue and agent).
    ``taken`` lists ``(path, displaced issue, displaced agent name)``."""
    taker = session.agent.name if session is not None else None
    by = f"issue {issue_id}" + (f" ({taker})" if taker else "")
    lost: dict[int, list[str]] = {}
    for path, displaced, _ in taken:
        lost.setdefault(displaced, []).append(path)
    parts = [
        f"issue {displaced} ({len(paths)} path{'s' if len(paths) > 1 else ''}: {', '.join(paths)})"
        for displaced, paths in sorted(lost.items())
    ]
    posts = {
        issue_scope(issue_id): f"Issue {issue_id} took file claims by force from "
        + "; ".join(parts)
        + "."
    }
    for displaced, paths in sorted(lost.items()):
        posts[issue_scope(displaced)] = (
            f"{by} took by force the file claims of issue {displaced} on: {', '.join(paths)}."
        )
    by_agent: dict[str, list[str]] = {}
    for path, displaced, agent in taken:
        if agent is not None:
            by_agent.setdefault(agent, []).append(f"{path} (issue {displaced})")
    for name, paths in sorted(by_agent.items()):
        posts[f"agent:{name}"] = f"{by} took by force your file claims on: {', '.join(paths)}."
    for scope, body in posts.items():
        if len(body) > MAX_BODY_CHARS:
            body = body[: MAX_BODY_CHARS - 1] + "…"
        record_message(workspace=workspace, scope=scope, body=body, session=session)
