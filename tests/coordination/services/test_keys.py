"""API key lookup: by the digest of the raw key, never a revoked or expired one, with an
agent key's agent; minting; the shapes the database refuses."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from coordination.models import Agent, ApiKey
from coordination.services import keys

pytestmark = pytest.mark.django_db


def test_the_key_lookup_gives_key_and_workspace(workspace):
    key, raw = ApiKey.issue(workspace, "fleet")
    found = keys.active_key(raw)
    assert found is not None and found.pk == key.pk and found.workspace.slug == "acme"
    assert found.created_at == ApiKey.objects.get(pk=key.pk).created_at
    assert keys.active_key(raw + "x") is None
    key.revoked_at = key.created_at
    key.save()
    assert keys.active_key(raw) is None


def test_the_lookup_loads_an_agent_keys_agent_and_refuses_an_expired_key(workspace):
    key, raw = keys.mint_key(
        workspace=workspace,
        kind="agent",
        agent_name="coder-1",
        expires_at=timezone.now() + timedelta(hours=1),
    )
    found = keys.active_key(raw)
    assert found is not None and found.kind == "agent" and found.can_force is False
    assert ApiKey.agent.is_cached(found) and found.agent.name == "coder-1"  # type: ignore[attr-defined]
    assert found.expires_at == key.expires_at
    # Expiry is judged by the database's clock, like liveness (invariant 1 (liveness)).
    ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert keys.active_key(raw) is None
    fleet, raw_fleet = ApiKey.issue(workspace, "fleet")
    found = keys.active_key(raw_fleet)
    assert found is not None and found.agent is None and found.kind == "fleet" and found.can_force


def test_minting_an_agent_key_reuses_or_creates_the_agent_of_its_workspace(
    workspace, other_workspace
):
    Agent.objects.create(workspace=other_workspace, name="coder-1")
    key, _ = keys.mint_key(workspace=workspace, kind="agent", agent_name="coder-1")
    again, _ = keys.mint_key(workspace=workspace, kind="agent", agent_name="coder-1")
    assert key.agent_id == again.agent_id and key.agent.workspace == workspace  # type: ignore[union-attr]
    assert Agent.objects.filter(name="coder-1").count() == 2


def test_the_database_refuses_a_key_of_the_wrong_shape(workspace):
    agent = Agent.objects.create(workspace=workspace, name="coder-1")
    for fields in (
        {"kind": "agent"},  # no agent
        {"kind": "fleet", "agent": agent},
        {"kind": "read", "can_force": True},
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            ApiKey.objects.create(workspace=workspace, key_hash=str(fields), **fields)


def test_the_database_refuses_an_agent_of_another_workspace(workspace, other_workspace):
    """The api_key_agent guard of migration 0010, as 0003's (invariant 9 (workspace isolation))."""
    theirs = Agent.objects.create(workspace=other_workspace, name="coder-1")
    with pytest.raises(IntegrityError, match="api_key_agent_same_workspace"), transaction.atomic():
        ApiKey.objects.create(workspace=workspace, kind="agent", agent=theirs, key_hash="x")
    key, _ = keys.mint_key(workspace=other_workspace, kind="agent", agent_name="coder-1")
    with pytest.raises(IntegrityError, match="api_key_agent_same_workspace"), transaction.atomic():
        Agent.objects.filter(pk=theirs.pk).update(workspace=workspace)
    assert key.agent_id == theirs.pk
