"""A row may link only to rows of its own workspace (invariant 9 (workspace isolation)), in the database too.

Covered links (child.column -> parent):

    issue.worktree_id            -> worktree
    issue.project_id             -> project
    issue.assignee_id            -> agent
    agent.worktree_id            -> worktree
    project.primary_worktree_id  -> worktree

Mechanism: triggers, not composite foreign keys. A composite key
``(workspace_id, worktree_id) REFERENCES worktree (workspace_id, id)`` needs a new
UNIQUE (workspace_id, id) on each parent and, on SQLite, a rebuild of every child
table (SQLite cannot add a constraint to an existing table); and a database-level
``ON DELETE SET NULL`` on it would null ``workspace_id`` as well. Triggers leave the
tables and Django's own foreign keys as they are, work the same on both backends and
name the broken rule in their error.

Each link has two guards:

* on the child, BEFORE INSERT and BEFORE UPDATE of the link or of ``workspace_id``:
  a non-NULL link must name an existing parent of the child's workspace. A NULL link
  always passes, so ``on_delete=SET_NULL`` (Django nulls the links, then deletes the
  parent) never trips it. An UPDATE that changes neither column is not checked: the
  row was valid and the parent side below keeps it so.
* on the parent, BEFORE UPDATE of ``workspace_id``: a parent still linked from a row
  of its old workspace cannot move to another.

Both raise an integrity error that Django reports as ``django.db.IntegrityError``:
SQLite with ``RAISE(ABORT, ...)`` (SQLITE_CONSTRAINT_TRIGGER), PostgreSQL with
SQLSTATE 23514 (check_violation) and the guard's name as the constraint name.

Concurrency (PostgreSQL, READ COMMITTED): the child guard reads the parent row
``FOR KEY SHARE``, the lock the foreign-key check takes anyway, so it does not queue
behind the WIP cap's ``FOR NO KEY UPDATE`` on the project. The parent guard first
locks its own row ``FOR UPDATE``, which conflicts with KEY SHARE: a move waits for
in-flight child writes and then sees them, and a child write waits for an in-flight
move and then reads the new workspace.

Existing data: nullable links (worktree, primary_worktree, assignee) that point into
another workspace are set to NULL, and each change is printed; such a link was
already unusable (run resolution refuses a worktree of another workspace). An issue
whose project is of another workspace cannot be nulled and guessing which side is
wrong could move the issue to another tenant, so the migration then refuses to run
and names the issues to fix.

SQLite drops a table's triggers when Django rebuilds the table (an AlterField on
these models): a later migration that rebuilds one of these tables must install the
guards again (tests/coordination/test_workspace_links.py fails until it does).
"""

from django.core.management.base import CommandError
from django.db import migrations
from django.db.models import F

# (guard name, child table, link column, parent table)
LINKS = [
    ("issue_worktree", "coordination_issue", "worktree_id", "coordination_worktree"),
    ("issue_project", "coordination_issue", "project_id", "coordination_project"),
    ("issue_assignee", "coordination_issue", "assignee_id", "coordination_agent"),
    ("agent_worktree", "coordination_agent", "worktree_id", "coordination_worktree"),
    (
        "project_primary_worktree",
        "coordination_project",
        "primary_worktree_id",
        "coordination_worktree",
    ),
]

# Nullable links whose cross-workspace values are set to NULL before the guards exist.
NULLABLE = [
    ("Issue", "worktree"),
    ("Issue", "assignee"),
    ("Agent", "worktree"),
    ("Project", "primary_worktree"),
]


def child_guard(link: str) -> str:
    return f"{link}_same_workspace"


def parent_guard(link: str) -> str:
    return f"{link}_same_workspace_on_move"


def child_message(link: str, child: str, column: str, parent: str) -> str:
    return (
        f"{child_guard(link)}: {child}.{column} must name a row of {parent} in the same workspace"
    )


def parent_message(link: str, child: str, column: str, parent: str) -> str:
    return (
        f"{parent_guard(link)}: a row of {parent} linked from {child}.{column} "
        f"cannot move to another workspace"
    )


# --- SQLite ------------------------------------------------------------------------


def sqlite_install(link: str, child: str, column: str, parent: str) -> list[str]:
    wrong = (
        f"NEW.{column} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {parent} AS p "
        f"WHERE p.id = NEW.{column} AND p.workspace_id = NEW.workspace_id)"
    )
    changed = f"(NEW.{column} IS NOT OLD.{column} OR NEW.workspace_id IS NOT OLD.workspace_id)"
    raise_child = f"SELECT RAISE(ABORT, '{child_message(link, child, column, parent)}');"
    raise_parent = f"SELECT RAISE(ABORT, '{parent_message(link, child, column, parent)}');"
    return [
        f"CREATE TRIGGER {child_guard(link)}_insert BEFORE INSERT ON {child} "
        f"FOR EACH ROW WHEN {wrong} BEGIN {raise_child} END",
        f"CREATE TRIGGER {child_guard(link)}_update "
        f"BEFORE UPDATE OF {column}, workspace_id ON {child} "
        f"FOR EACH ROW WHEN {changed} AND {wrong} BEGIN {raise_child} END",
        f"CREATE TRIGGER {parent_guard(link)} BEFORE UPDATE OF workspace_id ON {parent} "
        f"FOR EACH ROW WHEN NEW.workspace_id IS NOT OLD.workspace_id AND EXISTS "
        f"(SELECT 1 FROM {child} AS c WHERE c.{column} = OLD.id "
        f"AND c.workspace_id IS NOT NEW.workspace_id) BEGIN {raise_parent} END",
    ]


def sqlite_remove(link: str, child: str, column: str, parent: str) -> list[str]:
    return [
        f"DROP TRIGGER IF EXISTS {child_guard(link)}_insert",
        f"DROP TRIGGER IF EXISTS {child_guard(link)}_update",
        f"DROP TRIGGER IF EXISTS {parent_guard(link)}",
    ]


# --- PostgreSQL --------------------------------------------------------------------


def postgres_install(link: str, child: str, column: str, parent: str) -> list[str]:
    child_fn, parent_fn = child_guard(link), parent_guard(link)
    return [
        f"""
        CREATE FUNCTION {child_fn}() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            parent_workspace bigint;
        BEGIN
            IF NEW.{column} IS NULL THEN
                RETURN NEW;
            END IF;
            IF TG_OP = 'UPDATE' AND NEW.{column} IS NOT DISTINCT FROM OLD.{column}
               AND NEW.workspace_id IS NOT DISTINCT FROM OLD.workspace_id THEN
                RETURN NEW;
            END IF;
            SELECT p.workspace_id INTO parent_workspace
              FROM {parent} AS p WHERE p.id = NEW.{column} FOR KEY SHARE;
            IF parent_workspace IS DISTINCT FROM NEW.workspace_id THEN
                RAISE EXCEPTION '{child_message(link, child, column, parent)}'
                    USING ERRCODE = 'check_violation',
                          CONSTRAINT = '{child_fn}',
                          TABLE = '{child}',
                          COLUMN = '{column}';
            END IF;
            RETURN NEW;
        END
        $$
        """,
        f"""
        CREATE TRIGGER {child_fn}
        BEFORE INSERT OR UPDATE OF {column}, workspace_id ON {child}
        FOR EACH ROW EXECUTE FUNCTION {child_fn}()
        """,
        f"""
        CREATE FUNCTION {parent_fn}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.workspace_id IS NOT DISTINCT FROM OLD.workspace_id THEN
                RETURN NEW;
            END IF;
            PERFORM 1 FROM {parent} WHERE id = OLD.id FOR UPDATE;
            IF EXISTS (SELECT 1 FROM {child} AS c
                        WHERE c.{column} = OLD.id
                          AND c.workspace_id IS DISTINCT FROM NEW.workspace_id) THEN
                RAISE EXCEPTION '{parent_message(link, child, column, parent)}'
                    USING ERRCODE = 'check_violation',
                          CONSTRAINT = '{parent_fn}',
                          TABLE = '{parent}',
                          COLUMN = 'workspace_id';
            END IF;
            RETURN NEW;
        END
        $$
        """,
        f"""
        CREATE TRIGGER {parent_fn}
        BEFORE UPDATE OF workspace_id ON {parent}
        FOR EACH ROW EXECUTE FUNCTION {parent_fn}()
        """,
    ]


def postgres_remove(link: str, child: str, column: str, parent: str) -> list[str]:
    return [
        f"DROP TRIGGER IF EXISTS {child_guard(link)} ON {child}",
        f"DROP FUNCTION IF EXISTS {child_guard(link)}()",
        f"DROP TRIGGER IF EXISTS {parent_guard(link)} ON {parent}",
        f"DROP FUNCTION IF EXISTS {parent_guard(link)}()",
    ]


BUILDERS = {
    "sqlite": (sqlite_install, sqlite_remove),
    "postgresql": (postgres_install, postgres_remove),
}


def builders(vendor: str):
    if vendor not in BUILDERS:
        raise CommandError(
            f"coordination 0003: no workspace-link guards for database {vendor!r}; "
            f"Projektor supports SQLite and PostgreSQL."
        )
    return BUILDERS[vendor]


def execute(schema_editor, statements: list[str]) -> None:
    for statement in statements:
        schema_editor.execute(statement, params=None)


# --- the operations ------------------------------------------------------------------


def repair_existing_links(apps, schema_editor) -> None:
    alias = schema_editor.connection.alias
    Issue = apps.get_model("coordination", "Issue")
    stray = list(
        Issue.objects.using(alias)
        .exclude(project__workspace_id=F("workspace_id"))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if stray:
        raise CommandError(
            "coordination 0003: these issues belong to a project of another workspace: "
            f"{stray}. Move each to a project of its own workspace, then migrate again."
        )
    for model_name, field in NULLABLE:
        model = apps.get_model("coordination", model_name)
        rows = (
            model.objects.using(alias)
            .filter(**{f"{field}__isnull": False})
            .exclude(**{f"{field}__workspace_id": F("workspace_id")})
        )
        ids = sorted(rows.values_list("pk", flat=True))
        if ids:
            model.objects.using(alias).filter(pk__in=ids).update(**{field: None})
            print(
                f"\n  coordination 0003: cleared {model_name}.{field} of {len(ids)} row(s) "
                f"linked to another workspace: ids {ids}"
            )


def install_guards(apps, schema_editor) -> None:
    install, _ = builders(schema_editor.connection.vendor)
    execute(schema_editor, [sql for link in LINKS for sql in install(*link)])


def remove_guards(apps, schema_editor) -> None:
    _, remove = builders(schema_editor.connection.vendor)
    execute(schema_editor, [sql for link in LINKS for sql in remove(*link)])


class Migration(migrations.Migration):
    dependencies = [
        ("coordination", "0002_coordination_table_names"),
    ]

    operations = [
        migrations.RunPython(repair_existing_links, migrations.RunPython.noop, elidable=False),
        migrations.RunPython(install_guards, remove_guards, elidable=False),
    ]
