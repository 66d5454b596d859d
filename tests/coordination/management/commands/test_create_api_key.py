"""``create_api_key``: a key for a new or an existing workspace, printed alone; its kind,
agent, force and expiry (invariant 13 (the key is the actor))."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from coordination.models import ApiKey, Workspace, hash_api_key

pytestmark = pytest.mark.django_db


def test_create_api_key_creates_the_workspace_and_prints_only_the_key():
    out = StringIO()
    call_command("create_api_key", "new-team", stdout=out)
    raw = out.getvalue().strip()
    assert "\n" not in raw and raw.startswith(ApiKey.PREFIX)
    key = ApiKey.objects.get()
    assert key.workspace.slug == "new-team" and key.key_hash == hash_api_key(raw)


def test_create_api_key_reuses_an_existing_workspace(workspace):
    call_command("create_api_key", "acme", stdout=StringIO())
    assert Workspace.objects.count() == 1 and ApiKey.objects.get().workspace == workspace


def test_an_agent_key_with_force_and_an_expiry(workspace):
    out = StringIO()
    before = timezone.now()
    call_command(
        "create_api_key",
        "acme",
        "--kind=agent",
        "--agent=coder-1",
        "--can-force",
        "--expires=7d",
        "--name=coder-1",
        stdout=out,
    )
    key = ApiKey.objects.get(key_hash=hash_api_key(out.getvalue().strip()))
    assert (key.kind, key.agent.name, key.can_force, key.name) == (  # type: ignore[union-attr]
        "agent",
        "coder-1",
        True,
        "coder-1",
    )
    assert key.expires_at is not None
    assert before + timedelta(days=7) <= key.expires_at <= timezone.now() + timedelta(days=7)


def test_kinds_their_force_defaults_and_an_iso_expiry(workspace):
    call_command("create_api_key", "acme", "--kind=read", stdout=StringIO())
    call_command("create_api_key", "acme", "--kind=agent", "--agent=x", stdout=StringIO())
    call_command("create_api_key", "acme", "--no-can-force", stdout=StringIO())
    call_command("create_api_key", "acme", "--expires=2999-01-01T00:00:00", stdout=StringIO())
    read, agent, careful, later = ApiKey.objects.order_by("pk")
    assert (read.kind, read.can_force) == ("read", False)
    assert (agent.kind, agent.can_force) == ("agent", False)
    assert (careful.kind, careful.can_force) == ("fleet", False)
    assert later.expires_at is not None and later.expires_at.year == 2999
    assert later.expires_at.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "arguments",
    [
        ["--kind=agent"],  # no agent
        ["--agent=x"],  # a fleet key of one agent
        ["--kind=read", "--can-force"],
        ["--expires=2000-01-01T00:00:00Z"],
    ],
)
def test_a_key_that_cannot_be_is_an_error(workspace, arguments):
    with pytest.raises(CommandError):
        call_command("create_api_key", "acme", *arguments, stdout=StringIO())
    assert not ApiKey.objects.exists()


def test_a_malformed_expiry_is_a_usage_error(workspace):
    with pytest.raises(CommandError, match="expires"):
        call_command("create_api_key", "acme", "--expires=soon", stdout=StringIO())
