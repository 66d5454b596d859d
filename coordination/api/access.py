"""The permission every API view passes through (invariant 13 (the key is the actor)): each route's
rule, in one table, checked by ``coordination.services.access`` before the view runs.

A rule says what the call does (``Act``) and where its targets are: the session it
acts in (the URL id or a body field), the agent it acts as, whether it asks for
``force``, the run or key of its URL, the status it may close an issue with. The
table is keyed by the route's URL name and method; a route missing from it is
refused to every key but a fleet key (tests/coordination/api/test_access_routes.py
fails until it is listed). A method the view does not have passes: its 405 follows.

Only what the check needs is read from the body, with the validators the input
serializers use; a value they would refuse is left to them (a 400, as before).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rest_framework import exceptions, permissions
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from coordination.api.reference import refusals as r
from coordination.api.serializers.fields import IdField
from coordination.errors import Forbidden, InvalidInput
from coordination.models import MAX_ID, ApiKey
from coordination.services import access
from coordination.services.access import Act

URL = "url"  # the target is the URL's id


@dataclass(frozen=True)
class Rule:
    act: Act
    session: str | None = None  # the session acted in: URL, or a body field
    session_required: bool = False  # an agent key must name it (400 without)
    folded: bool = False  # the view's statement matches the session's agent itself
    agent: str | None = None  # the body field naming the agent acted as
    force: str | None = None  # the body field asking for force
    run: bool = False  # the URL id is a run of the caller's agent
    key: bool = False  # the URL id is a key: revoking it
    closes: str | None = None  # the body field of a status that may close the issue
    issue: str | None = None  # where that issue is: URL, or a body field


READ = Rule(Act.READ)
TRACK = Rule(Act.TRACK)
CONFIGURE = Rule(Act.CONFIGURE)
ADMINISTER = Rule(Act.ADMINISTER)
IN_BODY_SESSION = Rule(Act.WORK, session="session")

RULES: dict[tuple[str, str], Rule] = {
    # Sessions.
    # The landing queue: queued by the issue's holder, worked by testers.
    ("landing-list", "GET"): READ,
    ("landing-list", "POST"): Rule(Act.WORK, session="session", session_required=True),
    ("landing-detail", "GET"): READ,
    ("landing-take", "POST"): Rule(Act.WORK, session="session", session_required=True),
    ("landing-land", "POST"): Rule(Act.WORK, session="session", session_required=True),
    ("landing-reject", "POST"): Rule(Act.WORK, session="session", session_required=True),
    ("landing-return-batch", "POST"): Rule(Act.WORK, session="session", session_required=True),
    # Resources.
    ("resource-list", "GET"): READ,
    ("resource-list", "POST"): CONFIGURE,
    ("resource-detail", "GET"): READ,
    ("resource-detail", "PATCH"): CONFIGURE,
    ("resource-acquire", "POST"): Rule(Act.WORK, session="session", session_required=True),
    ("resource-release", "POST"): Rule(Act.WORK, session="session", session_required=True),
    ("resource-hold-list", "GET"): READ,
    ("session-list", "GET"): READ,
    ("session-list", "POST"): Rule(Act.WORK, agent="agent"),
    ("session-detail", "GET"): READ,
    ("session-heartbeat", "POST"): Rule(Act.WORK, session=URL, folded=True),
    ("session-progress", "POST"): Rule(Act.WORK, session=URL),
    ("session-end", "POST"): Rule(Act.WORK, session=URL),
    # Projects, issues, leases, the workflow.
    ("project-list", "GET"): READ,
    ("project-list", "POST"): CONFIGURE,
    ("project-detail", "GET"): READ,
    ("project-detail", "PATCH"): CONFIGURE,
    ("issue-list", "GET"): READ,
    ("issue-list", "POST"): TRACK,
    ("issue-ready", "GET"): READ,
    ("issue-detail", "GET"): READ,
    ("issue-detail", "PATCH"): TRACK,
    ("issue-transition", "POST"): Rule(Act.TRACK, closes="to", issue=URL),
    ("issue-claim", "POST"): IN_BODY_SESSION,
    ("issue-release", "POST"): IN_BODY_SESSION,
    ("issue-links", "POST"): TRACK,
    ("issue-link", "DELETE"): TRACK,
    ("lease-list", "GET"): READ,
    ("lease-detail", "GET"): READ,
    ("wip-cap-denial-list", "GET"): READ,
    ("workflow", "GET"): READ,
    # Worktrees and runs.
    ("worktree-list", "GET"): READ,
    ("worktree-list", "POST"): CONFIGURE,
    ("run-list", "GET"): READ,
    ("run-list", "POST"): IN_BODY_SESSION,
    ("run-detail", "GET"): READ,
    ("run-finish", "POST"): Rule(Act.WORK, run=True),
    # File claims and the logs.
    ("file-claim-list", "GET"): READ,
    ("file-claim-list", "POST"): Rule(
        Act.WORK, session="session", session_required=True, force="force"
    ),
    ("file-claim-detail", "GET"): READ,
    ("file-claim-release", "POST"): Rule(Act.WORK, session="session", session_required=True),
    ("file-claim-check", "POST"): READ,  # changes nothing: the pre-commit guard's call
    ("claim-conflict-list", "GET"): READ,
    ("heatmap", "GET"): READ,
    # Messages, events.
    ("message-list", "GET"): READ,
    ("message-list", "POST"): IN_BODY_SESSION,  # no session: the key's agent signs
    ("events", "GET"): READ,
    ("events-stream", "GET"): READ,
    # A unit of work.
    ("work-start", "POST"): Rule(Act.WORK, agent="agent"),
    ("work-finish", "POST"): Rule(Act.WORK, session="session", closes="to", issue="issue"),
    # Webhooks: fleet keys only, reads too (a delivery's errors name the receiver).
    ("webhook-list", "GET"): ADMINISTER,
    ("webhook-list", "POST"): ADMINISTER,
    ("webhook-detail", "GET"): ADMINISTER,
    ("webhook-detail", "PATCH"): ADMINISTER,
    ("webhook-detail", "DELETE"): ADMINISTER,
    ("webhook-deliveries", "GET"): ADMINISTER,
    # Keys.
    ("key-me", "GET"): READ,
    ("key-list", "GET"): ADMINISTER,
    ("key-list", "POST"): ADMINISTER,
    ("key-revoke", "POST"): Rule(Act.REVOKE, key=True),
}

# HEAD is the GET of its route; OPTIONS (the route's metadata) is a read.
SAFE = {"HEAD", "OPTIONS"}


def refusals_of(rule: Rule | None) -> list[r.Refusal]:
    """The 403s a route's rule can answer, for its reference (the schema's hook)."""
    if rule is None:
        return [r.NOT_FLEET]
    found = []
    if rule.act not in access.MAY[ApiKey.Kind.READ]:
        found.append(r.NOT_FLEET if rule.act == Act.ADMINISTER else r.READ_KEY)
    if rule.act == Act.CONFIGURE:
        found.append(r.AGENT_KEY)
    if rule.agent:
        found.append(r.NOT_OWN_AGENT)
    if rule.session:
        found.append(r.NOT_OWN_SESSION)
    if rule.force:
        found.append(r.NO_FORCE)
    if rule.run:
        found.append(r.NOT_OWN_RUN)
    if rule.closes:
        found.append(r.CLOSES_OTHERS)
    if rule.key:
        found.append(r.NOT_SELF)
    return found


def key_of(request: Request) -> ApiKey | None:
    """The API key of the request; ``None`` for a person."""
    return request.auth if isinstance(request.auth, ApiKey) else None


def rule_of(url_name: str | None, method: str) -> Rule | None:
    if method == "OPTIONS":
        return READ
    return RULES.get((url_name or "", "GET" if method == "HEAD" else method))


def _id(value: Any) -> int | None:
    """An id as the input serializers read it; ``None`` if absent or malformed (the
    serializer then answers the 400)."""
    if value is None:
        return None
    try:
        found: int = IdField().run_validation(value)
    except ValidationError:
        return None
    return found


def _url_id(view: Any) -> int | None:
    raw = getattr(view, "kwargs", {}).get("pk")
    if raw is None or not str(raw).isdigit() or int(raw) > MAX_ID:
        return None  # the view answers 404
    return int(raw)


class KeyAccess(permissions.BasePermission):
    """The rule of the route, for the request's key (``coordination.services.access``).

    Its refusals are DRF's own exceptions (rendered in the same error shape), which
    DRF's OPTIONS metadata expects of a permission when it asks which writes a caller
    may make."""

    def has_permission(self, request: Request, view: Any) -> bool:
        try:
            return self.check(request, view)
        except Forbidden as refused:
            raise exceptions.PermissionDenied(refused.detail) from None
        except InvalidInput as refused:
            field = refused.extra.get("field", "non_field_errors")
            raise exceptions.ValidationError({field: [refused.detail]}) from None

    def check(self, request: Request, view: Any) -> bool:
        method = (request.method or "GET").upper()
        if method not in SAFE and getattr(view, method.lower(), None) is None:
            return True  # not a method of this view: 405
        key = key_of(request)
        match = getattr(request, "resolver_match", None)
        rule = rule_of(match.url_name if match is not None else None, method)
        if rule is None:  # fleet keys and people only, until it has one
            access.allow_unlisted(key)
            return True
        access.allow(key, rule.act)
        if access.kind_of(key) == ApiKey.Kind.FLEET and (key is None or key.can_force):
            return True  # nothing more to check: no body read, no statement
        check_targets(request, view, key, rule)
        return True


def check_targets(request: Request, view: Any, key: ApiKey | None, rule: Rule) -> None:
    body: Mapping[str, Any] = {}
    if rule.agent or rule.force or rule.closes or (rule.session and rule.session != URL):
        data = request.data
        body = data if isinstance(data, Mapping) else {}
    if rule.agent:
        access.check_agent(key, body.get(rule.agent))
    session = None
    if rule.session == URL:
        session = _url_id(view)
    elif rule.session:
        session = _id(body.get(rule.session))
        if rule.session_required and body.get(rule.session) is None:
            access.require_session(key, None)
    if rule.force and body.get(rule.force) is True:
        access.check_force(key)
    if session is not None and not rule.folded:
        access.check_session(key, session)
    if rule.run and (run := _url_id(view)) is not None:
        access.check_run(key, run)
    if rule.key and (revoked := _url_id(view)) is not None:
        access.check_revoke(key, revoked)
    if rule.closes:
        issue = _url_id(view) if rule.issue == URL else _id(body.get(rule.issue or ""))
        if issue is not None:
            access.check_close(key, issue, body.get(rule.closes))
