"""Migration 0006: existing leases and locks numbered per issue and per worktree."""

import importlib

import pytest
from django.apps import apps
from django.utils import timezone

from coordination.models import IssueLease, Worktree, WorktreeLock
from tests.coordination.conftest import lease_fences, lock_fences

fences_migration = importlib.import_module("coordination.migrations.0006_fences")


@pytest.mark.django_db
def test_the_migration_numbers_existing_rows_per_issue_and_worktree_in_id_order(
    workspace, make_issue, make_session, tree, editor
):
    session = make_session()
    first, second = make_issue(), make_issue()
    released = {"released_at": timezone.now(), "release_reason": "released"}
    for issue, fence in [(first, 30), (second, 40), (first, 20), (first, 10), (second, 50)]:
        IssueLease.objects.create(
            workspace=workspace, issue=issue, session=session, fence=fence, **released
        )
    docs = Worktree.objects.create(workspace=workspace, slug="docs", name="Docs")
    for worktree, fence in [(tree, 90), (docs, 80), (tree, 70)]:
        WorktreeLock.objects.create(
            workspace=workspace, worktree=worktree, session=session, fence=fence, **released
        )

    fences_migration.number_existing_rows(apps, editor)

    assert (lease_fences(first), lease_fences(second)) == ([1, 2, 3], [1, 2])
    assert (lock_fences(tree), lock_fences(docs)) == ([1, 2], [1])
