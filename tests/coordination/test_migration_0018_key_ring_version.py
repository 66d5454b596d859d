"""The key ring's version (migration 0018), on SQLite and PostgreSQL: an update or a
deletion of a workspace's keys, agents or the workspace itself bumps its counter in
the same transaction, an insert does not, another workspace's stays; a deleted
workspace's counter goes with it; the triggers come and go with the migration, and
a process that kept a key sees every change on the key's next request."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from coordination.db import sql
from coordination.db.rows import dialect, fetchone
from coordination.models import Agent, ApiKey, KeyRingVersion, Workspace
from coordination.services import keys
from tests.coordination.test_migration_0014_requires_filesystem_default import migrate, triggers


def version(workspace: Workspace) -> int:
    row = KeyRingVersion.objects.filter(workspace_id=workspace.pk).first()
    return 0 if row is None else row.version


@pytest.mark.django_db
def test_updates_and_deletions_of_the_ring_bump_its_workspace_and_inserts_do_not(
    workspace, other_workspace
):
    agent = Agent.objects.create(workspace=workspace, name="coder-1")
    key, _ = ApiKey.issue(workspace, "fleet")
    ApiKey.issue(workspace, "agent", kind="agent", agent=agent)
    assert version(workspace) == 0
    steps = [
        lambda: ApiKey.objects.filter(pk=key.pk).update(can_force=False),
        lambda: Agent.objects.filter(pk=agent.pk).update(role="reviewer"),
        lambda: Workspace.objects.filter(pk=workspace.pk).update(events_pruned_through=9),
        lambda: ApiKey.objects.filter(pk=key.pk).delete(),
        lambda: Agent.objects.filter(pk=agent.pk).delete(),  # and its key, by cascade
    ]
    seen = [version(workspace)]
    for step in steps:
        with transaction.atomic():
            step()
            seen.append(version(workspace))  # in the changing transaction
    assert seen == sorted(set(seen)) and len(seen) == len(steps) + 1
    assert version(other_workspace) == 0
    Workspace.objects.filter(pk=workspace.pk).delete()
    assert not KeyRingVersion.objects.filter(workspace_id=workspace.pk).exists()


@pytest.mark.django_db
def test_a_kept_key_costs_one_read_by_primary_key_and_each_request_its_own_instances(
    workspace,
):
    _, raw = ApiKey.issue(workspace, "fleet")
    first = keys.active_key(raw)
    with CaptureQueriesContext(connection) as sent:
        again = keys.active_key(raw)
    assert [q["sql"] for q in sent.captured_queries][0].startswith("SELECT COALESCE(r.version")
    assert len(sent.captured_queries) == 1
    assert again is not None and first is not None
    assert again is not first and again.workspace is not first.workspace
    assert (again.pk, again.workspace.slug, again.created_at) == (
        first.pk,
        first.workspace.slug,
        first.created_at,
    )


CHANGES = {
    "the agent renamed": lambda key: Agent.objects.filter(pk=key.agent_id).update(name="renamed"),
    "the workspace renamed": lambda key: Workspace.objects.filter(pk=key.workspace_id).update(
        slug="renamed"
    ),
    "events pruned": lambda key: Workspace.objects.filter(pk=key.workspace_id).update(
        events_pruned_through=42
    ),
    "the key may no longer force": lambda key: ApiKey.objects.filter(pk=key.pk).update(
        can_force=False
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("change", CHANGES)
def test_a_change_to_a_kept_keys_rows_is_seen_on_its_next_request(workspace, change):
    key, raw = keys.mint_key(workspace=workspace, kind="agent", agent_name="coder-1")
    ApiKey.objects.filter(pk=key.pk).update(can_force=True)
    kept = keys.active_key(raw)
    assert kept is not None
    CHANGES[change](kept)
    found = keys.active_key(raw)
    assert found is not None
    fresh = ApiKey.objects.select_related("workspace", "agent").get(pk=key.pk)
    assert (found.can_force, found.workspace.slug, found.agent.name) == (  # type: ignore[union-attr]
        fresh.can_force,
        fresh.workspace.slug,
        fresh.agent.name,  # type: ignore[union-attr]
    )
    assert found.workspace.events_pruned_through == fresh.workspace.events_pruned_through


@pytest.mark.django_db
def test_a_kept_key_revoked_expired_or_deleted_is_refused_at_once(workspace):
    revoked, raw_revoked = ApiKey.issue(workspace, "fleet")
    deleted, raw_deleted = ApiKey.issue(workspace, "fleet")
    assert keys.active_key(raw_revoked) and keys.active_key(raw_deleted)
    keys.revoke_key(workspace=workspace, key_id=revoked.pk)
    deleted.delete()
    assert keys.active_key(raw_revoked) is None
    assert keys.active_key(raw_deleted) is None


@pytest.mark.django_db
def test_the_kept_keys_read_judges_expiry_by_the_database_clock_without_the_version(
    workspace,
):
    """An expiry passes without any write: the read itself refuses the key."""
    key = ApiKey.objects.create(
        workspace=workspace,
        key_prefix="pk_x",
        key_hash="0" * 64,
        expires_at=timezone.now() - timedelta(seconds=1),
    )  # an insert: no bump
    d = dialect()
    assert fetchone(sql.key_ring_version(d, key_id=key.pk, key_hash="0" * 64)) is None
    ApiKey.objects.create(workspace=workspace, key_prefix="pk_y", key_hash="1" * 64)
    live = ApiKey.objects.get(key_hash="1" * 64)
    assert fetchone(sql.key_ring_version(d, key_id=live.pk, key_hash="1" * 64)) == (0,)
    assert fetchone(sql.key_ring_version(d, key_id=live.pk, key_hash="0" * 64)) is None


@pytest.mark.django_db(transaction=True)
def test_the_triggers_come_and_go_and_the_others_stay():
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    now = triggers()

    def ours(rows):
        return {row[0] for row in rows if row[0].startswith("key_ring_")}

    expected = (
        {
            f"key_ring_{t}_{e}"
            for t in ("apikey", "agent", "workspace")
            for e in ("update", "delete")
        }
        if connection.vendor == "sqlite"
        else {"key_ring_apikey", "key_ring_agent", "key_ring_workspace"}
    )
    assert ours(now) == expected
    try:
        migrate([("coordination", "0017_work_graph_workspace_guards")])
        before = triggers()
        assert ours(before) == set()
        assert before == [row for row in now if row[0] not in expected]
        migrate([("coordination", "0018_key_ring_version")])
    finally:
        migrate(latest)
    assert triggers() == now
