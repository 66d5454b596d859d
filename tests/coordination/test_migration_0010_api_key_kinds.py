"""Migration 0010: every key made before kinds existed becomes a fleet key that may
force, as it behaved; no agent, no expiry (invariant 13 (the key is the actor)). Run backwards and
forwards on the test database."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("coordination", "0009_webhooks")]
AFTER = [("coordination", "0010_api_key_kinds")]


def migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


@pytest.mark.django_db(transaction=True)
def test_existing_keys_become_fleet_keys_that_may_force():
    # Every app's newest migration: going back to 0009 also unapplies the migrations
    # of other apps that depend on later ones (the heatmap's rollups).
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        executor = migrate(BEFORE)
        old = executor.loader.project_state(BEFORE).apps
        workspace = old.get_model("coordination", "Workspace").objects.create(slug="w", name="W")
        old.get_model("coordination", "ApiKey").objects.create(
            workspace=workspace, name="old", key_prefix="pk_old", key_hash="h" * 64
        )
        executor = migrate(AFTER)
        new = executor.loader.project_state(AFTER).apps
        key = new.get_model("coordination", "ApiKey").objects.get(name="old")
        assert (key.kind, key.agent_id, key.can_force, key.expires_at) == (
            "fleet",
            None,
            True,
            None,
        )
    finally:
        migrate(latest)


@pytest.mark.django_db(transaction=True)
def test_every_app_is_migrated_again_afterwards():
    """Run after the migration test (file order): it left no app behind."""
    executor = MigrationExecutor(connection)
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
