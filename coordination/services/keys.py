"""API keys: the lookup every request starts with, and minting and revoking them
(invariant 13 (the key is the actor): the key is the actor)."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from coordination.db import sql
from coordination.db.rows import dialect, fetchone, loaded_values, rebuilt, take
from coordination.errors import Forbidden, InvalidInput, NotFound
from coordination.models import Agent, ApiKey, Workspace, hash_api_key

Kind = ApiKey.Kind


# Keys this process has read, by digest: the rows as loaded, and the workspace's key
# ring version read with them. Shared by the threads (a dict's get and set are atomic);
# emptied when full rather than aged: its entries are a few hundred bytes.
CACHED_KEYS_LIMIT = 10_000


@dataclass(frozen=True)
class CachedKey:
    key_id: int
    version: int
    key: tuple[Any, ...]  # the loaded field values, in from_db's order
    workspace: tuple[Any, ...]
    agent: tuple[Any, ...] | None


_cached: dict[str, CachedKey] = {}


def active_key(raw_key: str) -> ApiKey | None:
    """The key whose SHA-256 digest is that of ``raw_key``, unless it is revoked or
    expired, with its workspace and agent; ``None`` if there is none. One statement:

    - a key this process has read before: its row by primary key (still that digest,
      unrevoked, unexpired by the database's clock) and its workspace's key ring
      version; while the version is the one read with the copy, the copy serves;
    - else, or if the version moved: the key, its workspace, its agent and the
      version, by the digest's index (a second statement only for a changed ring).

    The version moves with every update or deletion of the workspace's keys, agents
    or the workspace itself (database triggers, migration 0018), in the changing
    transaction: a revocation, an expiry or any change holds on the next request, on
    every app server. Each request gets instances of its own."""
    digest = hash_api_key(raw_key)
    d = dialect()
    cached = _cached.get(digest)
    if cached is not None:
        row = fetchone(sql.key_ring_version(d, key_id=cached.key_id, key_hash=digest))
        if row is None:  # revoked, expired or deleted
            _cached.pop(digest, None)
            return None
        if int(row[0]) == cached.version:
            return instances(cached)
    row = fetchone(sql.active_key(d, digest))
    if row is None:
        _cached.pop(digest, None)
        return None
    key, at = take(ApiKey, row, 0)
    workspace, at = take(Workspace, row, at)
    agent, at = take(Agent, row, at)
    assert key is not None and workspace is not None
    if len(_cached) >= CACHED_KEYS_LIMIT:
        _cached.clear()
    _cached[digest] = CachedKey(
        key_id=key.pk,
        version=int(row[at]),
        key=loaded_values(key),
        workspace=loaded_values(workspace),
        agent=None if agent is None else loaded_values(agent),
    )
    return joined(key, workspace, agent)


def instances(cached: CachedKey) -> ApiKey:
    key = rebuilt(ApiKey, cached.key)
    workspace = rebuilt(Workspace, cached.workspace)
    agent = None if cached.agent is None else rebuilt(Agent, cached.agent)
    return joined(key, workspace, agent)


def joined(key: ApiKey, workspace: Workspace, agent: Agent | None) -> ApiKey:
    key.workspace = workspace
    key.agent = agent
    if agent is not None:
        agent.workspace = workspace
    return key


def forget_cached_keys() -> None:
    """Empty this process's copies (tests, and a process that wants a clean start)."""
    _cached.clear()


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
    """Revoke a key of ``workspace`` (another workspace's is not found, invariant 9 (workspace
    isolation)). Revoking twice keeps the first time; from the next request on the key is 401."""
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
