"""The work graph keeps to one workspace, refused by the database itself (migration
0017), on SQLite and on PostgreSQL: a link between issues of another workspace, an
expected path of another workspace's issue, an issue with either moving away; the
migration's handling of existing rows; its guards come and go, the others stay."""

import importlib

import pytest
from django.apps import apps
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from coordination.models import ExpectedPath, Issue, IssueLink
from coordination.services import graph
from tests.coordination.test_migration_0014_requires_filesystem_default import migrate, triggers

guards_migration = importlib.import_module(
    "coordination.migrations.0017_work_graph_workspace_guards"
)

LINK_GUARD = "issue_link_same_workspace"
PATH_GUARD = "issue_expected_path_same_workspace"
MOVE_GUARD = "issue_graph_same_workspace_on_move"


def refused(guard):
    return pytest.raises(IntegrityError, match=guard)


def raw_insert(table, **values):
    columns = ", ".join(values)
    marks = ", ".join(["%s"] * len(values))
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(values.values()))


def raw_link(workspace_id, source_id, target_id, type="blocks"):
    raw_insert(
        "issue_links",
        workspace_id=workspace_id,
        source_id=source_id,
        target_id=target_id,
        type=type,
        created_at="2026-01-01 00:00:00",
    )


def raw_path(workspace_id, issue_id, path="src/app.py"):
    raw_insert(
        "issue_expected_paths",
        workspace_id=workspace_id,
        issue_id=issue_id,
        path=path,
        probe=path,
        subtree_end="",
    )


@pytest.fixture
def theirs(other_workspace, their_project):
    return Issue.objects.create(workspace=other_workspace, project=their_project, title="Theirs")


@pytest.fixture
def mine(make_issue):
    return make_issue(title="Mine"), make_issue(title="Also mine")


@pytest.mark.parametrize("side", ["source", "target"])
def test_a_raw_sql_link_to_another_workspaces_issue_is_refused(workspace, mine, theirs, side):
    source, target = (theirs, mine[1]) if side == "source" else (mine[0], theirs)
    with refused(LINK_GUARD), transaction.atomic():
        raw_link(workspace.pk, source.pk, target.pk)
    assert not IssueLink.objects.exists()


def test_a_raw_sql_link_of_another_workspace_between_our_issues_is_refused(other_workspace, mine):
    with refused(LINK_GUARD), transaction.atomic():
        raw_link(other_workspace.pk, mine[0].pk, mine[1].pk)
    assert not IssueLink.objects.exists()


def test_a_raw_sql_expected_path_of_another_workspace_is_refused(
    workspace, other_workspace, mine, theirs
):
    with refused(PATH_GUARD), transaction.atomic():
        raw_path(workspace.pk, theirs.pk)
    with refused(PATH_GUARD), transaction.atomic():
        raw_path(other_workspace.pk, mine[0].pk)
    assert not ExpectedPath.objects.exists()


def test_raw_sql_rows_within_the_workspace_pass(workspace, mine):
    raw_link(workspace.pk, mine[0].pk, mine[1].pk)
    raw_path(workspace.pk, mine[0].pk)
    assert IssueLink.objects.get().source_id == mine[0].pk
    assert ExpectedPath.objects.get().issue_id == mine[0].pk


def test_a_raw_update_across_workspaces_is_refused(workspace, other_workspace, mine, theirs):
    graph.link_issues(
        workspace=workspace, source_id=mine[0].pk, type="blocks", target_id=mine[1].pk
    )
    graph.set_expected_paths(issue=mine[0], paths=["src/app.py"])

    with refused(LINK_GUARD), transaction.atomic():
        IssueLink.objects.update(target=theirs)
    with refused(LINK_GUARD), transaction.atomic():
        IssueLink.objects.update(workspace=other_workspace)
    with refused(PATH_GUARD), transaction.atomic():
        ExpectedPath.objects.update(issue=theirs)

    assert IssueLink.objects.get().target_id == mine[1].pk
    assert set(ExpectedPath.objects.values_list("issue_id", flat=True)) == {mine[0].pk}


@pytest.mark.parametrize("held", ["source", "target", "path"])
def test_an_issue_with_links_or_paths_cannot_move_away(
    workspace, other_workspace, their_project, mine, held
):
    first, second = mine
    if held == "path":
        graph.set_expected_paths(issue=first, paths=["docs/"])
    else:
        source, target = (first, second) if held == "source" else (second, first)
        graph.link_issues(
            workspace=workspace, source_id=source.pk, type="relates_to", target_id=target.pk
        )

    with refused(MOVE_GUARD), transaction.atomic():
        Issue.objects.filter(pk=first.pk).update(workspace=other_workspace, project=their_project)

    assert Issue.objects.get(pk=first.pk).workspace_id == workspace.pk


def test_an_issue_without_links_or_paths_may_move(other_workspace, their_project, mine):
    Issue.objects.filter(pk=mine[0].pk).update(workspace=other_workspace, project=their_project)
    assert Issue.objects.get(pk=mine[0].pk).workspace_id == other_workspace.pk


def test_deleting_a_linked_issue_still_deletes_its_links_and_paths(workspace, mine):
    graph.link_issues(
        workspace=workspace, source_id=mine[0].pk, type="blocks", target_id=mine[1].pk
    )
    graph.set_expected_paths(issue=mine[0], paths=["src/"])
    mine[0].delete()
    assert not IssueLink.objects.exists() and not ExpectedPath.objects.exists()


# --- the migration's handling of existing rows ---------------------------------------


def test_migration_moves_rows_to_their_issues_workspace_and_refuses_a_link_across(
    capsys, workspace, other_workspace, mine, theirs, editor
):
    guards_migration.remove_guards(apps, editor)
    try:
        raw_link(other_workspace.pk, mine[0].pk, mine[1].pk)
        raw_path(other_workspace.pk, mine[0].pk)

        guards_migration.repair_existing_rows(apps, editor)

        assert IssueLink.objects.get().workspace_id == workspace.pk
        assert ExpectedPath.objects.get().workspace_id == workspace.pk
        assert "IssueLink" in capsys.readouterr().out

        raw_link(workspace.pk, mine[0].pk, theirs.pk, type="relates_to")
        across = IssueLink.objects.get(target=theirs).pk
        with pytest.raises(CommandError, match=rf"\[{across}\]"):
            guards_migration.repair_existing_rows(apps, editor)
    finally:
        IssueLink.objects.filter(target=theirs).delete()
        guards_migration.install_guards(apps, editor)

    with refused(LINK_GUARD), transaction.atomic():
        raw_link(workspace.pk, mine[1].pk, theirs.pk)


# --- the migration both ways -------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_guards_come_and_go_and_the_others_stay():
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    now = triggers()
    ours = {LINK_GUARD, PATH_GUARD, MOVE_GUARD}

    def named(rows):
        return {name for name in ours for row in rows if row[0].startswith(name)}

    try:
        migrate([("coordination", "0017_work_graph_workspace_guards")])
        left = triggers()
        assert named(left) == ours
        migrate([("coordination", "0016_progress_and_lease_age")])
        before = triggers()
        assert named(before) == set()
        assert before == [row for row in left if not any(row[0].startswith(n) for n in ours)]
        migrate([("coordination", "0017_work_graph_workspace_guards")])
        assert triggers() == left
    finally:
        migrate(latest)
    assert triggers() == now
