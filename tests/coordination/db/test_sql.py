"""The SQL home: its table names and column lists are the models' (the lists derived
from them), and it (with the bench's direct ceiling, which sends its statements) runs
without Django."""

import gc
import subprocess
import sys
import threading
import weakref
from typing import Any

import pytest
from django.apps import apps
from django.db import connections

from coordination.db import rows, sql

TABLES = {
    "API_KEY": "ApiKey",
    "WORKSPACE": "Workspace",
    "WORKTREE": "Worktree",
    "PROJECT": "Project",
    "AGENT": "Agent",
    "SESSION": "AgentSession",
    "ISSUE": "Issue",
    "LEASE": "IssueLease",
    "CLAIM": "FileClaim",
    "CONFLICT": "ClaimConflict",
    "WORKTREE_LOCK": "WorktreeLock",
}


@pytest.mark.parametrize(("constant", "model"), TABLES.items())
def test_table_names_are_the_models_tables(constant, model):
    assert getattr(sql, constant) == apps.get_model("coordination", model)._meta.db_table


def coordination_models():
    return list(apps.get_app_config("coordination").get_models())


def test_column_lists_are_every_concrete_column_in_model_order():
    """Derived from the models (``coordination.db.columns``), none written by hand."""
    assert {
        model._meta.db_table: tuple(field.column for field in model._meta.concrete_fields)
        for model in coordination_models()
    } == sql.COLUMNS


@pytest.mark.parametrize("model", coordination_models(), ids=lambda model: model.__name__)
def test_the_statements_select_what_the_orm_selects_and_the_rows_mapping_loads(model):
    """A statement's column list is the ORM's own SELECT, in its order, and the rows
    mapping (``rows.load_plan``) takes it as ``from_db``'s fields."""
    table = model._meta.db_table
    selected, _, _ = model.objects.all().query.get_compiler("default").get_select()
    orm = ", ".join(f"t.{expression.target.column}" for expression, _, _ in selected)
    assert sql.columns(table, "t") == orm
    plan = rows.load_plan(connections["default"], model)
    assert plan.width == len(sql.COLUMNS[table])
    assert plan.attnames == [field.attname for field in model._meta.concrete_fields]


def test_the_rows_mapping_refuses_column_lists_that_are_not_the_models():
    derived = dict(sql.COLUMNS)
    table = sql.SESSION
    try:
        sql.set_columns({**derived, table: derived[table][:-1]})
        connections["default"].__dict__.pop(rows.PLANS_ATTRIBUTE, None)
        with pytest.raises(KeyError, match="AgentSession"):
            rows.load_plan(connections["default"], apps.get_model("coordination", "AgentSession"))
    finally:
        sql.set_columns(derived)
        connections["default"].__dict__.pop(rows.PLANS_ATTRIBUTE, None)


def test_the_builders_and_the_direct_ceiling_import_no_django():
    code = (
        "import sys, benchmarks.direct, coordination.db.sql; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_locks_are_postgresql_only_and_the_liveness_predicate_names_the_ttl():
    postgres, sqlite = sql.Dialect("postgresql", 90), sql.Dialect("sqlite", 90)
    assert postgres.lock("FOR UPDATE") == " FOR UPDATE"
    assert sqlite.lock("FOR UPDATE") == ""
    assert "interval '90 seconds'" in postgres.live("s")
    assert "'-90 seconds'" in sqlite.live("s")


def test_a_release_by_an_empty_id_list_matches_nothing():
    text, params = sql.release_claims(sql.Dialect("sqlite", 120), reason="overridden", ids=[])
    assert "1 = 0" in text and params == ["overridden"]


def test_the_claim_indexes_sqlite_is_told_to_use_are_the_models():
    """SQLite's INDEXED BY names them (coordination.db.sql.file_claims)."""
    from coordination.db.sql import file_claims as statements
    from coordination.models import FileClaim

    constraints = {constraint.name for constraint in FileClaim._meta.constraints}
    indexes = {tuple(index.fields): index.name for index in FileClaim._meta.indexes}
    assert statements.UNRELEASED_PATHS in constraints
    assert indexes[("workspace", "issue", "released_at")] == statements.ISSUE_CLAIMS


def test_a_threads_connection_and_its_load_plans_go_with_the_thread():
    """A server that starts a thread per request (``runserver``, as ``make run`` serves)
    makes a connection per request: once its thread has ended, nothing of the rows
    mapping may keep it (its plans' converters are bound to it), or each request's
    connection stays in memory for good."""
    model = apps.get_model("coordination", "AgentSession")
    ended: list[weakref.ref[Any]] = []

    def request() -> None:
        db = connections["default"]  # this thread's own
        rows.load_plan(db, model)
        ended.append(weakref.ref(db))
        db.close()

    thread = threading.Thread(target=request)
    thread.start()
    thread.join()
    gc.collect()
    assert ended and ended[0]() is None
