"""API keys: the lookup every request starts with, and minting and revoking them
(invariant 13: the key is the actor)."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from coordination.errors import Forbidden, InvalidInput, NotFound
from coordination.models import Agent, ApiKey, Workspace, hash_api_key
from coordination.services import sql
from coordination.services.rows import dialect, fetchone, take

Kind = ApiKey.Kind


def active_key(raw_key: str) -> ApiKey | None:
    """The key whose SHA-256 digest is that of ``raw_key``, unless it is revoked or
    expired, with its workspace and agent, in one indexed query; ``None`` if there is
    none. Nothing is cached: a revocation or an expiry holds on the next request, on
    every app server."""
    row = fetchone(sql.active_key(dialect(), hash_api_key(raw_key)))
    if row is None:
        return None
    key, at = take(ApiKey, row, 0)
    assert key is not None
    workspace, at = take(Workspace, row, at)
    assert workspace is not None
    key.workspace = workspace
    agent, _ = take(Agent, row, at)
    key.agent = agent
    if agent is not None:
        agent.workspace = workspace
    return key


def mint_key(
    *,
    workspace: Workspace,
    name: str = "",
    kind: str = Kind.FLEET,
    agent_name: str | None = None,
    can_force: bool | None = None,
    expires_at: datetime | None = None,
    by: ApiKey | None = None,
) -> tuple[ApiKey, str]:
    """A new key of ``workspace`` and its raw value (shown once, never stored).

    An agent key names its agent (created if new); the other kinds name none. A read
    key cannot force. ``by`` is the minting key: a key that may not force cannot mint
    one that may (``can_force`` defaults to true for a fleet key, else false)."""
    if kind == Kind.AGENT and not agent_name:
        raise InvalidInput("An agent key needs the agent it acts as.", field="agent")
    if kind != Kind.AGENT and agent_name:
        raise InvalidInput(f"A {kind} key acts for no one agent: omit agent.", field="agent")
    force = (kind == Kind.FLEET) if can_force is None else can_force
    if kind == Kind.READ and force:
        raise InvalidInput("A read key never writes, so it cannot force.", field="can_force")
    if force and by is not None and not by.can_force:
        raise Forbidden("This key may not force, so it cannot mint a key that may.")
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidInput("expires_at must be in the future.", field="expires_at")
    with transaction.atomic():
        agent = None
        if agent_name:  # get_or_create survives a concurrent register of the same name
            agent, _ = Agent.objects.get_or_create(workspace=workspace, name=agent_name)
        key, raw = ApiKey.issue(
            workspace, name, kind=kind, agent=agent, can_force=force, expires_at=expires_at
        )
    return key, raw


def revoke_key(*, workspace: Workspace, key_id: int) -> ApiKey:
    """Revoke a key of ``workspace`` (another workspace's is not found, invariant 9).
    Revoking twice keeps the first time; from the next request on the key is 401."""
    key = (
        ApiKey.objects.filter(workspace=workspace, pk=key_id)
        .select_related("agent", "workspace")
        .first()
    )
    if key is None:
        raise NotFound(f"Key {key_id} does not exist.")
    ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    key.refresh_from_db(fields=["revoked_at"])
    return key
