"""The contention logs are append-only in the database itself (invariant 8 (append-only logs))."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from coordination.errors import FileConflict, WipLimitReached
from coordination.models import ClaimConflict, FileClaim, WipCapDenial, Workspace
from coordination.services import file_claims, leases, logs

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged(workspace, project, make_issue, make_session):
    log_one_of_each(workspace, project, make_issue, make_session)


def log_one_of_each(workspace, project, make_issue, make_session):
    """One conflict row and one WIP-cap denial row, written by the services."""
    project.agent_wip_limit = 1
    project.save()
    holder = make_session("holder")
    first, second = make_issue(), make_issue()
    leases.claim_issue(workspace=workspace, issue_id=first.pk, session_id=holder.pk)
    file_claims.claim_files(
        workspace=workspace, issue_id=first.pk, paths=["a.py"], session_id=holder.pk
    )
    late = make_session("late")
    with pytest.raises(WipLimitReached):
        leases.claim_issue(workspace=workspace, issue_id=second.pk, session_id=late.pk)
    with pytest.raises(FileConflict):
        file_claims.claim_files(
            workspace=workspace, issue_id=second.pk, paths=["a.py"], session_id=late.pk
        )
    assert ClaimConflict.objects.count() == WipCapDenial.objects.count() == 1


@pytest.mark.parametrize("model", [ClaimConflict, WipCapDenial])
def test_orm_updates_and_deletes_are_refused(logged, model):
    with pytest.raises(IntegrityError), transaction.atomic():
        model.objects.update(occurred_at="2000-01-01T00:00:00Z")
    with pytest.raises(IntegrityError), transaction.atomic():
        model.objects.all().delete()
    assert model.objects.count() == 1


@pytest.mark.parametrize("table", ["claim_conflicts", "wip_cap_denials"])
def test_raw_sql_updates_and_deletes_are_refused(logged, table):
    for statement in (
        f"UPDATE {table} SET session_id = NULL"
        if table == "wip_cap_denials"
        else f"UPDATE {table} SET path = 'b.py'",
        f"DELETE FROM {table}",
    ):
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        assert cursor.fetchone()[0] == 1


def test_inserts_still_work(logged, workspace):
    conflict = ClaimConflict.objects.get()
    ClaimConflict.objects.create(
        workspace=workspace,
        path="c.py",
        rejected_issue=conflict.rejected_issue,
        holding_issue=conflict.holding_issue,
    )
    assert ClaimConflict.objects.count() == 2


def test_a_workspace_is_deleted_with_its_logs_and_the_door_shuts(
    logged, workspace, other_workspace
):
    logs.delete_workspace(workspace)
    assert not Workspace.objects.filter(pk=workspace.pk).exists()
    assert not ClaimConflict.objects.exists() and not WipCapDenial.objects.exists()
    assert not FileClaim.objects.exists()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {logs.UNLOCK_TABLE}")
        assert cursor.fetchone()[0] == 0
    assert Workspace.objects.filter(pk=other_workspace.pk).exists()


def test_the_door_opens_for_one_workspace_only(logged, workspace, other_workspace):
    with pytest.raises(IntegrityError), transaction.atomic(), logs.unlocked(other_workspace.pk):
        ClaimConflict.objects.all().delete()
    assert ClaimConflict.objects.count() == 1


def test_a_plain_delete_of_a_workspace_is_refused(logged, workspace):
    with pytest.raises(IntegrityError), transaction.atomic():
        workspace.delete()
    assert Workspace.objects.filter(pk=workspace.pk).exists()


def test_a_history_written_after_the_fact_is_stamped_in_the_past_at_once(
    workspace, project, make_issue, make_session
):
    """``recorded_earlier``: how a history (the demo's) gets past log rows without
    moving them, which the database refuses."""
    two_days = timedelta(days=2, microseconds=500)
    with logs.recorded_earlier(two_days):
        log_one_of_each(workspace, project, make_issue, make_session)
    assert logs.recording_offset() is None  # only inside the block
    now = timezone.now()
    for model in (ClaimConflict, WipCapDenial):
        stamp = model.objects.get().occurred_at
        assert now - two_days - timedelta(minutes=1) < stamp < now - two_days, model.__name__
