"""start_work and finish_work: the unit of work's assignee, status and rollback."""

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from coordination import paths as paths_module
from coordination.errors import FileConflict, LeaseHeld, WipLimitReached
from coordination.models import (
    AgentSession,
    ClaimConflict,
    Event,
    FileClaim,
    Issue,
    IssueLease,
    WipCapDenial,
)
from coordination.services import file_claims, work

pytestmark = pytest.mark.django_db

REPORT = {"summary": "Fixed.", "verification": "Tests pass."}


def start(workspace, issue, agent="erin", **kwargs):
    return work.start_work(workspace=workspace, agent_name=agent, issue_id=issue.pk, **kwargs)


def test_a_started_todo_issue_is_in_progress_and_assigned_to_its_agent(workspace, make_issue):
    issue = make_issue(status="todo")
    started = start(workspace, issue, paths=["src/login.py"])
    issue.refresh_from_db()
    assert (issue.status, issue.assignee) == ("in_progress", started.session.agent)

    work.finish_work(
        workspace=workspace, session_id=started.session.pk, issue_id=issue.pk, report=REPORT
    )
    issue.refresh_from_db()
    assert (issue.status, issue.assignee.name) == ("in_review", "erin")


def test_start_work_never_replaces_the_assignee(workspace, make_issue, agent):
    issue = make_issue(status="in_progress", assignee=agent)
    start(workspace, issue)
    issue.refresh_from_db()
    assert issue.assignee == agent


def test_a_refused_start_assigns_nobody(workspace, make_issue, make_session):
    issue, other = make_issue(status="todo"), make_issue(title="Other")
    holder = make_session("holder")
    file_claims.claim_files(
        workspace=workspace, issue_id=other.pk, paths=["src/a.py"], session_id=holder.pk
    )
    with pytest.raises(FileConflict):
        start(workspace, issue, paths=["src/a.py"])  # after its lease: rolled back
    start(workspace, other, agent="holder")
    with pytest.raises(LeaseHeld):
        start(workspace, other, agent="late")
    assert Issue.objects.get(pk=issue.pk).assignee is None
    assert Issue.objects.get(pk=other.pk).assignee.name == "holder"


def test_start_work_is_refused_under_another_issues_directory_and_logs_each_pair(
    workspace, make_issue, make_session
):
    """Invariant 11 (overlap) in start_work: a path under another issue's directory claim refuses
    the whole start; the conflict rows, one per (path, holder) at the deeper path, are
    written once, after the rollback, naming the agent and no session."""
    issue, other = make_issue(status="todo"), make_issue()
    holder = make_session("holder")
    file_claims.claim_files(
        workspace=workspace, issue_id=other.pk, paths=["src/", "src/a.py"], session_id=holder.pk
    )

    with pytest.raises(FileConflict) as caught:
        start(workspace, issue, paths=["src/a.py", "docs/"])

    assert [(c["path"], c["held_path"]) for c in caught.value.extra["conflicts"]] == [
        ("src/a.py", "src/"),
        ("src/a.py", "src/a.py"),
    ]
    rows = ClaimConflict.objects.order_by("id")
    assert [
        (r.path, r.holding_issue_id, r.rejected_session_id, r.rejected_agent.name) for r in rows
    ] == [
        ("src/a.py", other.pk, None, "erin"),
        ("src/a.py", other.pk, None, "erin"),
    ]
    refused = Event.objects.get(type="claims.refused")
    assert refused.data["conflicts_total"] == 2 and refused.session_id is None
    assert not AgentSession.objects.filter(agent__name="erin").exists()
    assert not IssueLease.objects.filter(issue=issue).exists()
    assert not FileClaim.objects.filter(issue=issue).exists()

    started = start(workspace, issue, paths=["docs/", "lib/x.py"])
    assert [c.path for c in started.claims] == ["docs/", "lib/x.py"]


# --- a refused start writes its log once (invariants 3 (the WIP cap), 5 (all-or-nothing)) ---


def inserts_into(queries, table):
    """The INSERT statements into ``table`` among ``queries`` (rolled back or not)."""
    into = re.compile(rf'INSERT INTO "?{table}"?\b', re.IGNORECASE)
    return [query for query in queries if into.search(query["sql"])]


def test_a_start_refused_by_the_wip_cap_writes_one_denial_row(workspace, make_issue, make_session):
    project = make_issue().project
    project.agent_wip_limit = 1
    project.save()
    work.start_work(workspace=workspace, agent_name="holder", issue_id=make_issue().pk)
    wanted = make_issue(title="Wanted", status="todo")

    with CaptureQueriesContext(connection) as captured, pytest.raises(WipLimitReached):
        start(workspace, wanted, agent="late", paths=["src/a.py"])

    assert len(inserts_into(captured.captured_queries, "wip_cap_denials")) == 1
    denial = WipCapDenial.objects.get()
    assert (denial.issue_id, denial.session_id, denial.agent.name) == (wanted.pk, None, "late")
    assert Event.objects.filter(type="wip.denied").count() == 1
    assert not AgentSession.objects.filter(agent__name="late").exists()


def test_a_start_refused_by_file_conflicts_writes_one_row_per_contested_path(
    workspace, make_issue, make_session
):
    issue, other = make_issue(status="todo"), make_issue(title="Other")
    holder = make_session("holder")
    file_claims.claim_files(
        workspace=workspace, issue_id=other.pk, paths=["a.py", "b.py"], session_id=holder.pk
    )

    with CaptureQueriesContext(connection) as captured, pytest.raises(FileConflict):
        start(workspace, issue, paths=["a.py", "b.py", "c.py"])

    written = inserts_into(captured.captured_queries, "claim_conflicts")
    assert len(written) == 1  # one INSERT, after the rollback: no row written twice
    rows = ClaimConflict.objects.order_by("path")
    assert [(r.path, r.rejected_session_id, r.rejected_agent.name) for r in rows] == [
        ("a.py", None, "erin"),
        ("b.py", None, "erin"),
    ]
    assert Event.objects.filter(type="claims.refused").count() == 1
    assert not FileClaim.objects.filter(issue=issue).exists()


@pytest.mark.parametrize("holder_there", [False, True], ids=["started", "refused"])
def test_start_work_checks_its_paths_once(
    workspace, make_issue, make_session, holder_there, monkeypatch
):
    issue, other = make_issue(status="todo"), make_issue(title="Other")
    if holder_there:
        file_claims.claim_files(
            workspace=workspace,
            issue_id=other.pk,
            paths=["src/a.py"],
            session_id=make_session("holder").pk,
        )
    checks = []
    normalise = paths_module.normalise_paths
    monkeypatch.setattr(
        paths_module,
        "normalise_paths",
        lambda raws, **kw: checks.append(1) or normalise(raws, **kw),
    )
    try:
        start(workspace, issue, paths=["./src//a.py", "docs/"])
    except FileConflict:
        assert holder_there
    assert len(checks) == 1


def test_the_issue_page_names_the_agent_that_started_the_work(workspace, make_issue, alice):
    issue = make_issue(status="todo")
    start(workspace, issue)
    client = Client()
    client.force_login(alice)

    page = client.get(f"/workspaces/{workspace.slug}/issues/{issue.pk}/").content.decode()

    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "Moved from todo to in_progress by erin" in text
    assert "someone (no agent)" not in text
