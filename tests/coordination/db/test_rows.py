"""Model instances from SQL rows (``rows.instance``): the values the ORM loads, through
converters planned once per model and connection."""

import threading

import pytest
from django.db import connections

from coordination.db.rows import fetchone, instance, load_plan
from coordination.db.sql import COLUMNS
from coordination.models import AgentSession, FileClaim, ReleaseReason
from coordination.services import file_claims


def row_of(model, pk):
    table = model._meta.db_table
    names = ", ".join(COLUMNS[table])
    return fetchone((f"SELECT {names} FROM {table} WHERE id = %s", [pk]))


def loaded(obj) -> dict:
    return {field.attname: getattr(obj, field.attname) for field in obj._meta.concrete_fields}


@pytest.mark.django_db
def test_instances_hold_what_the_orm_loads(workspace, issue, make_session):
    session = make_session()
    file_claims.claim_files(
        workspace=workspace, issue_id=issue.pk, paths=["src/a.py"], session_id=session.pk
    )
    file_claims.release_files(workspace=workspace, issue_id=issue.pk)
    claim = FileClaim.objects.get(issue=issue)  # released: every column has a value
    assert claim.release_reason == ReleaseReason.RELEASED

    for _ in range(2):  # the plan made, then the plan reused
        for model, pk in ((FileClaim, claim.pk), (AgentSession, session.pk)):
            made = instance(model, row_of(model, pk))
            assert loaded(made) == loaded(model.objects.get(pk=pk))
            assert made._state.adding is False and made._state.db == "default"


@pytest.mark.django_db
def test_a_row_of_the_wrong_width_is_refused(workspace, issue, make_session):
    session = make_session()
    row = row_of(AgentSession, session.pk)
    with pytest.raises(ValueError, match="columns"):
        instance(AgentSession, row[:-1])


def test_each_connection_has_its_own_plans():
    """Converters are the connection's methods, and Django gives each thread its own
    connection: a plan is made once per model and connection, never shared."""
    ours = load_plan(connections["default"], FileClaim)
    assert load_plan(connections["default"], FileClaim) is ours
    theirs = []

    def plan_there() -> None:
        theirs.append((connections["default"], load_plan(connections["default"], FileClaim)))

    thread = threading.Thread(target=plan_there)
    thread.start()
    thread.join()
    ((their_connection, their_plan),) = theirs
    assert their_connection is not connections["default"]
    assert their_plan is not ours and their_plan.attnames == ours.attnames
