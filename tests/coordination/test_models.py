"""What the models declare: the original schema's table names (docs/design.md, Words), one
unreleased lease per issue, fences never reused, keys stored as digests."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from coordination.models import (
    AgentSession,
    ApiKey,
    ClaimConflict,
    FileClaim,
    HolderQuerySet,
    Holding,
    Issue,
    IssueLease,
    WipCapDenial,
    WorktreeLock,
)

ORIGINAL_NAMES = {
    AgentSession: "agent_sessions",
    IssueLease: "issue_leases",
    FileClaim: "issue_file_claims",
    ClaimConflict: "claim_conflicts",
    WipCapDenial: "wip_cap_denials",
}


@pytest.mark.django_db
def test_coordination_tables_carry_their_original_names():
    tables = set(connection.introspection.table_names())
    for model, name in ORIGINAL_NAMES.items():
        assert model._meta.db_table == name and name in tables


@pytest.mark.django_db
def test_the_database_refuses_a_reused_fence(workspace, issue, tree, make_session):
    session = make_session()
    IssueLease.objects.create(
        workspace=workspace, issue=issue, session=session, fence=7, released_at=timezone.now()
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        IssueLease.objects.create(workspace=workspace, issue=issue, session=session, fence=7)
    WorktreeLock.objects.create(
        workspace=workspace, worktree=tree, session=session, fence=3, released_at=timezone.now()
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        WorktreeLock.objects.create(workspace=workspace, worktree=tree, session=session, fence=3)


def test_only_the_hash_of_a_key_is_stored(workspace):
    key, raw = ApiKey.issue(workspace)
    assert raw not in {key.key_hash, key.key_prefix, key.name}
    assert len(key.key_hash) == 64


def test_partial_unique_index_allows_one_unreleased_lease_per_issue(workspace, issue, make_session):
    a, b = make_session("a"), make_session("b")
    IssueLease.objects.create(workspace=workspace, issue=issue, session=a)
    with pytest.raises(IntegrityError), transaction.atomic():
        IssueLease.objects.create(workspace=workspace, issue=issue, session=b)


def test_leases_and_worktree_locks_are_held_by_one_declaration():
    """The holder's fields are declared once (``Holding``): the same columns, the same
    definitions, the same liveness queryset; file claims share the queryset."""
    held = ["acquired_at", "released_at", "release_reason", "fence"]
    lease, lock = (
        {name: model._meta.get_field(name).deconstruct()[1:] for name in held}
        for model in (IssueLease, WorktreeLock)
    )
    assert issubclass(IssueLease, Holding) and issubclass(WorktreeLock, Holding)
    assert lease == lock
    for model in (IssueLease, WorktreeLock, FileClaim):
        assert isinstance(model.objects.all(), HolderQuerySet)


@pytest.mark.django_db
def test_an_issue_inserted_without_requires_filesystem_needs_none(workspace, project):
    """The seed's ``INTEGER NOT NULL DEFAULT 0``: a raw INSERT that leaves the column
    out (a bulk load, psql) gets false from the database itself."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO coordination_issue"
            " (workspace_id, project_id, title, description, status, updated_at)"
            " VALUES (%s, %s, 'Raw', 'Inserted by hand.', 'todo', %s)",
            [workspace.pk, project.pk, timezone.now()],
        )
        cursor.execute("SELECT requires_filesystem FROM coordination_issue WHERE title = 'Raw'")
        (needed,) = cursor.fetchone()
    assert needed in (False, 0) and not needed
    assert Issue.objects.get(title="Raw").requires_filesystem is False
