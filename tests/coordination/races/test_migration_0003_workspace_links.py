"""The workspace-link guards of migration 0003 under concurrent writes (PostgreSQL)."""

import pytest
from django.db import IntegrityError, transaction

from coordination.models import Issue, Worktree
from tests.coordination.races.conftest import hold_and_race


def _race(first, second):
    """Run ``first`` in a transaction that stays open after its write until ``second``,
    started as soon as that write is done, waits on it. Return what each raised (or None)."""

    def hold(let_second_in):
        first()
        let_second_in()

    def race():
        with transaction.atomic():
            second()

    return hold_and_race(hold, race)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_link_and_a_concurrent_move_of_its_target_cannot_both_commit(
    workspace, other_workspace, issue, ours
):
    def link():
        Issue.objects.filter(pk=issue.pk).update(worktree=ours)

    def move():
        Worktree.objects.filter(pk=ours.pk).update(workspace=other_workspace)

    linked_first = _race(link, move)
    assert linked_first[0] is None and isinstance(linked_first[1], IntegrityError)
    assert Issue.objects.get(pk=issue.pk).worktree_id == ours.pk

    Issue.objects.filter(pk=issue.pk).update(worktree=None)
    moved_first = _race(move, link)
    assert moved_first[0] is None and isinstance(moved_first[1], IntegrityError)
    assert Issue.objects.get(pk=issue.pk).worktree_id is None
    assert Worktree.objects.get(pk=ours.pk).workspace_id == other_workspace.pk
