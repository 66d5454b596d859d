"""The work graph keeps to one workspace (invariant 9 (workspace isolation)), in the database too: a link
joins two issues of its own workspace, an expected path belongs to an issue of its
own workspace, and an issue with links or expected paths cannot move to another.

The guards are 0003's (read its notes on the mechanism and on PostgreSQL's locks):
on the child, BEFORE INSERT and BEFORE UPDATE of its issue columns or of
``workspace_id``; on the issue, BEFORE UPDATE of ``workspace_id``. Each raises an
integrity error naming the guard (SQLite: RAISE(ABORT); PostgreSQL: SQLSTATE 23514
with the guard as the constraint).

Existing rows: a link or an expected path whose issues share one workspace gets that
workspace (the issues are the truth); a link between issues of two workspaces has no
right answer, so the migration then refuses to run and names the links to remove.

The SQL is this migration's own, frozen as it was written. SQLite drops a table's
triggers when Django rebuilds it: a later migration that rebuilds issue_links,
issue_expected_paths or coordination_issue sets them aside and puts them back, as
0016 does.
"""

from django.core.management.base import CommandError
from django.db import migrations
from django.db.models import F

SQLITE_INSTALL = [
    """CREATE TRIGGER issue_link_same_workspace_insert BEFORE INSERT ON issue_links
FOR EACH ROW WHEN NOT EXISTS (SELECT 1 FROM coordination_issue AS s
    WHERE s.id = NEW.source_id AND s.workspace_id = NEW.workspace_id)
  OR NOT EXISTS (SELECT 1 FROM coordination_issue AS t
    WHERE t.id = NEW.target_id AND t.workspace_id = NEW.workspace_id)
BEGIN SELECT RAISE(ABORT, 'issue_link_same_workspace: issue_links.source_id and target_id must name issues of the link''s workspace'); END""",
    """CREATE TRIGGER issue_link_same_workspace_update
BEFORE UPDATE OF source_id, target_id, workspace_id ON issue_links
FOR EACH ROW WHEN (NEW.source_id IS NOT OLD.source_id OR NEW.target_id IS NOT OLD.target_id
    OR NEW.workspace_id IS NOT OLD.workspace_id)
  AND (NOT EXISTS (SELECT 1 FROM coordination_issue AS s
    WHERE s.id = NEW.source_id AND s.workspace_id = NEW.workspace_id)
  OR NOT EXISTS (SELECT 1 FROM coordination_issue AS t
    WHERE t.id = NEW.target_id AND t.workspace_id = NEW.workspace_id))
BEGIN SELECT RAISE(ABORT, 'issue_link_same_workspace: issue_links.source_id and target_id must name issues of the link''s workspace'); END""",
    """CREATE TRIGGER issue_expected_path_same_workspace_insert
BEFORE INSERT ON issue_expected_paths
FOR EACH ROW WHEN NOT EXISTS (SELECT 1 FROM coordination_issue AS i
    WHERE i.id = NEW.issue_id AND i.workspace_id = NEW.workspace_id)
BEGIN SELECT RAISE(ABORT, 'issue_expected_path_same_workspace: issue_expected_paths.issue_id must name an issue of the row''s workspace'); END""",
    """CREATE TRIGGER issue_expected_path_same_workspace_update
BEFORE UPDATE OF issue_id, workspace_id ON issue_expected_paths
FOR EACH ROW WHEN (NEW.issue_id IS NOT OLD.issue_id OR NEW.workspace_id IS NOT OLD.workspace_id)
  AND NOT EXISTS (SELECT 1 FROM coordination_issue AS i
    WHERE i.id = NEW.issue_id AND i.workspace_id = NEW.workspace_id)
BEGIN SELECT RAISE(ABORT, 'issue_expected_path_same_workspace: issue_expected_paths.issue_id must name an issue of the row''s workspace'); END""",
    """CREATE TRIGGER issue_graph_same_workspace_on_move
BEFORE UPDATE OF workspace_id ON coordination_issue
FOR EACH ROW WHEN NEW.workspace_id IS NOT OLD.workspace_id AND (
  EXISTS (SELECT 1 FROM issue_links AS l WHERE l.source_id = OLD.id)
  OR EXISTS (SELECT 1 FROM issue_links AS l WHERE l.target_id = OLD.id)
  OR EXISTS (SELECT 1 FROM issue_expected_paths AS p WHERE p.issue_id = OLD.id))
BEGIN SELECT RAISE(ABORT, 'issue_graph_same_workspace_on_move: an issue with links or expected paths cannot move to another workspace'); END""",
]

SQLITE_REMOVE = [
    "DROP TRIGGER IF EXISTS issue_link_same_workspace_insert",
    "DROP TRIGGER IF EXISTS issue_link_same_workspace_update",
    "DROP TRIGGER IF EXISTS issue_expected_path_same_workspace_insert",
    "DROP TRIGGER IF EXISTS issue_expected_path_same_workspace_update",
    "DROP TRIGGER IF EXISTS issue_graph_same_workspace_on_move",
]

POSTGRES_INSTALL = [
    """CREATE FUNCTION issue_link_same_workspace() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    source_workspace bigint;
    target_workspace bigint;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.source_id IS NOT DISTINCT FROM OLD.source_id
       AND NEW.target_id IS NOT DISTINCT FROM OLD.target_id
       AND NEW.workspace_id IS NOT DISTINCT FROM OLD.workspace_id THEN
        RETURN NEW;
    END IF;
    SELECT i.workspace_id INTO source_workspace
      FROM coordination_issue AS i WHERE i.id = NEW.source_id FOR KEY SHARE;
    SELECT i.workspace_id INTO target_workspace
      FROM coordination_issue AS i WHERE i.id = NEW.target_id FOR KEY SHARE;
    IF source_workspace IS DISTINCT FROM NEW.workspace_id
       OR target_workspace IS DISTINCT FROM NEW.workspace_id THEN
        RAISE EXCEPTION 'issue_link_same_workspace: issue_links.source_id and target_id must name issues of the link''s workspace'
            USING ERRCODE = 'check_violation',
                  CONSTRAINT = 'issue_link_same_workspace',
                  TABLE = 'issue_links';
    END IF;
    RETURN NEW;
END
$$""",
    """CREATE TRIGGER issue_link_same_workspace
BEFORE INSERT OR UPDATE OF source_id, target_id, workspace_id ON issue_links
FOR EACH ROW EXECUTE FUNCTION issue_link_same_workspace()""",
    """CREATE FUNCTION issue_expected_path_same_workspace() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    issue_workspace bigint;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.issue_id IS NOT DISTINCT FROM OLD.issue_id
       AND NEW.workspace_id IS NOT DISTINCT FROM OLD.workspace_id THEN
        RETURN NEW;
    END IF;
    SELECT i.workspace_id INTO issue_workspace
      FROM coordination_issue AS i WHERE i.id = NEW.issue_id FOR KEY SHARE;
    IF issue_workspace IS DISTINCT FROM NEW.workspace_id THEN
        RAISE EXCEPTION 'issue_expected_path_same_workspace: issue_expected_paths.issue_id must name an issue of the row''s workspace'
            USING ERRCODE = 'check_violation',
                  CONSTRAINT = 'issue_expected_path_same_workspace',
                  TABLE = 'issue_expected_paths',
                  COLUMN = 'issue_id';
    END IF;
    RETURN NEW;
END
$$""",
    """CREATE TRIGGER issue_expected_path_same_workspace
BEFORE INSERT OR UPDATE OF issue_id, workspace_id ON issue_expected_paths
FOR EACH ROW EXECUTE FUNCTION issue_expected_path_same_workspace()""",
    """CREATE FUNCTION issue_graph_same_workspace_on_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.workspace_id IS NOT DISTINCT FROM OLD.workspace_id THEN
        RETURN NEW;
    END IF;
    PERFORM 1 FROM coordination_issue WHERE id = OLD.id FOR UPDATE;
    IF EXISTS (SELECT 1 FROM issue_links AS l WHERE l.source_id = OLD.id)
       OR EXISTS (SELECT 1 FROM issue_links AS l WHERE l.target_id = OLD.id)
       OR EXISTS (SELECT 1 FROM issue_expected_paths AS p WHERE p.issue_id = OLD.id) THEN
        RAISE EXCEPTION 'issue_graph_same_workspace_on_move: an issue with links or expected paths cannot move to another workspace'
            USING ERRCODE = 'check_violation',
                  CONSTRAINT = 'issue_graph_same_workspace_on_move',
                  TABLE = 'coordination_issue',
                  COLUMN = 'workspace_id';
    END IF;
    RETURN NEW;
END
$$""",
    """CREATE TRIGGER issue_graph_same_workspace_on_move
BEFORE UPDATE OF workspace_id ON coordination_issue
FOR EACH ROW EXECUTE FUNCTION issue_graph_same_workspace_on_move()""",
]

POSTGRES_REMOVE = [
    "DROP TRIGGER IF EXISTS issue_link_same_workspace ON issue_links",
    "DROP FUNCTION IF EXISTS issue_link_same_workspace()",
    "DROP TRIGGER IF EXISTS issue_expected_path_same_workspace ON issue_expected_paths",
    "DROP FUNCTION IF EXISTS issue_expected_path_same_workspace()",
    "DROP TRIGGER IF EXISTS issue_graph_same_workspace_on_move ON coordination_issue",
    "DROP FUNCTION IF EXISTS issue_graph_same_workspace_on_move()",
]

GUARDS = {
    "sqlite": (SQLITE_INSTALL, SQLITE_REMOVE),
    "postgresql": (POSTGRES_INSTALL, POSTGRES_REMOVE),
}


def guards(vendor: str) -> tuple[list[str], list[str]]:
    if vendor not in GUARDS:
        raise CommandError(
            f"coordination 0017: no work-graph workspace guards for database {vendor!r}; "
            f"Projektor supports SQLite and PostgreSQL."
        )
    return GUARDS[vendor]


def repair_existing_rows(apps, schema_editor) -> None:
    """Rows whose issues share a workspace take it; links across two workspaces stop
    the migration."""
    alias = schema_editor.connection.alias
    IssueLink = apps.get_model("coordination", "IssueLink")
    ExpectedPath = apps.get_model("coordination", "ExpectedPath")
    links = IssueLink.objects.using(alias)
    across = sorted(
        links.exclude(source__workspace_id=F("target__workspace_id")).values_list("pk", flat=True)
    )
    if across:
        raise CommandError(
            "coordination 0017: these links join issues of two workspaces: "
            f"{across}. Remove them, then migrate again."
        )
    for model, issue in ((IssueLink, "source"), (ExpectedPath, "issue")):
        stray = model.objects.using(alias).exclude(workspace_id=F(f"{issue}__workspace_id"))
        for row in stray.select_related(issue).order_by("pk"):
            row.workspace_id = getattr(row, issue).workspace_id
            row.save(update_fields=["workspace"])
            print(
                f"\n  coordination 0017: {model.__name__} {row.pk} moved to its issue's "
                f"workspace {row.workspace_id}"
            )


def install_guards(apps, schema_editor) -> None:
    install, _ = guards(schema_editor.connection.vendor)
    for statement in install:
        schema_editor.execute(statement, params=None)


def remove_guards(apps, schema_editor) -> None:
    _, remove = guards(schema_editor.connection.vendor)
    for statement in remove:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("coordination", "0016_progress_and_lease_age"),
    ]

    operations = [
        migrations.RunPython(repair_existing_rows, migrations.RunPython.noop, elidable=False),
        migrations.RunPython(install_guards, remove_guards, elidable=False),
    ]
